/* SPDX-License-Identifier: MIT */
/* The options that go together, and those that do not, once all are applied. */
#include <stdbool.h>
#include "options/table.h"
#include "timing/budget.h"

/* The command, its NAME and run's command: 0, or 1 when there is nothing more to
 * check (help, version), or EXIT_USAGE. */
static int check_command(tool_opts *o, char *err, size_t cap)
{
    if (o->cmd == CMD_HELP || o->cmd == CMD_VERSION) {
        /* version --help, help --help: that command's help, as for the others */
        if (o->help && o->help_cmd == CMD_NONE) o->help_cmd = o->cmd;
        return 1;
    }
    if (o->help) {
        o->help_cmd = o->cmd;
        return 1;
    }
    if (o->version) return 1;
    if (o->cmd == CMD_TIMING) return 0; /* no NAME */
    if (o->cmd == CMD_NONE)
        return tool_usage_err(
            err, cap, "no command given (commands: " CMD_LIST "; see elector --help)");
    if (!o->name)
        return tool_usage_err(err, cap, "missing %s NAME (see elector %s --help)",
                              o->cmd == CMD_LOCK ? "lock" : "election",
                              tool_cmd_name(o->cmd));
    if (!*o->name)
        return tool_usage_err(err, cap, "%s NAME must not be empty",
                              o->cmd == CMD_LOCK ? "lock" : "election");
    if (o->cmd == CMD_RUN && !(o->argv && o->argv[0]))
        return tool_usage_err(
            err, cap,
            "run: missing command after '--' (elector run NAME -- CMD ARGS...)");
    if (o->argv && !o->argv[0] && o->cmd == CMD_LOCK)
        return tool_usage_err(err, cap,
                              "lock: missing command after '--' (elector lock NAME -- "
                              "CMD ARGS..., or no '--' to hold the lock)");
    return 0;
}

/* The members, the supervised command's options, --http. */
static int check_given(tool_opts *o, const bool *given, bool supervised, char *err,
                       size_t cap)
{
    if (o->proclaim_stdin && o->cmd != CMD_CAMPAIGN)
        return tool_usage_err(err, cap,
                              "--proclaim-stdin is only for `elector campaign`");
    /* The members from DNS or from --endpoints: the command line beats the
     * environment; both on the command line is a mistake. */
    if (o->discovery_srv && given[O_ENDPOINTS] && given[O_DISCOVERY_SRV])
        return tool_usage_err(
            err, cap, "--endpoints and --discovery-srv both name the members: give one");
    if (o->discovery_srv && given[O_ENDPOINTS])
        o->discovery_srv = NULL;
    else if (o->discovery_srv)
        o->endpoints = NULL;
    if (given[O_DISCOVERY_SRV_NAME] && !o->discovery_srv)
        return tool_usage_err(err, cap,
                              "--discovery-srv-name needs --discovery-srv DOMAIN");
    bool timing = o->cmd == CMD_TIMING;
    if ((given[O_MARGIN] || given[O_RTT] || given[O_ELECTION_TIMEOUT] ||
         given[O_DRIFT]) &&
        !timing)
        return tool_usage_err(err, cap,
                              "--margin, --rtt, --election-timeout and --drift are only "
                              "for `elector timing`");
    /* timing: --grace, --grace-on-loss and --release-on-exit are its settings. */
    if ((given[O_RESTART] || given[O_PIDNS] ||
         ((given[O_GRACE] || given[O_GRACE_LOSS]) && !timing)) &&
        !supervised)
        return tool_usage_err(
            err, cap,
            "--restart, --grace, --grace-on-loss and --pid-namespace are "
            "only for `elector run` and `elector lock NAME CMD`");
    if (given[O_RELEASE] && !timing &&
        (supervised || (o->cmd != CMD_CAMPAIGN && o->cmd != CMD_LOCK)))
        return tool_usage_err(
            err, cap,
            "--release-on-exit is for campaign and lock without a command "
            "(run's guard releases the lease itself)");
    if (given[O_EVENTS_FD] && (!supervised || o->fmt != FMT_JSON))
        return tool_usage_err(err, cap,
                              "--events-fd is for `elector -w json run` (or lock with "
                              "a command)");
    if (given[O_HTTP] && (o->cmd == CMD_LEADER || o->cmd == CMD_SWITCHOVER || timing))
        return tool_usage_err(err, cap, "--http is for campaign, run, lock and observe");
    return 0;
}

static int check_health(tool_opts *o, const bool *given, char *err, size_t cap)
{
    bool health_opt = given[O_HEALTH_INTERVAL] || given[O_HEALTH_TIMEOUT] ||
                      given[O_HEALTH_RETRIES] || given[O_HEALTH_START] ||
                      given[O_HEALTH_HOLDOFF] || given[O_HEALTH_HOLDOFF_MAX];
    if ((given[O_HEALTH_CMD] || health_opt) && o->cmd != CMD_RUN &&
        o->cmd != CMD_CAMPAIGN)
        return tool_usage_err(err, cap,
                              "--health-cmd and --health-* are for run and campaign");
    if (health_opt && !o->health_cmd)
        return tool_usage_err(err, cap,
                              "--health-interval, --health-timeout, --health-retries, "
                              "--health-start-period, --health-holdoff and "
                              "--health-holdoff-max need --health-cmd");
    /* Only --health-holdoff given: the bound follows it up if need be. */
    if (!given[O_HEALTH_HOLDOFF_MAX] && o->health_holdoff_max_ms < o->health_holdoff_ms)
        o->health_holdoff_max_ms = o->health_holdoff_ms;
    if (o->health_holdoff_max_ms < o->health_holdoff_ms)
        return tool_usage_err(err, cap,
                              "--health-holdoff-max (%lldms) must not be less than "
                              "--health-holdoff (%lldms)",
                              (long long)o->health_holdoff_max_ms,
                              (long long)o->health_holdoff_ms);
    return 0;
}

/* Waiting (--timeout, --no-wait, -n), switchover's --to, --value, TLS files. */
static int check_waits(tool_opts *o, const bool *given, char *err, size_t cap)
{
    bool waits = o->cmd == CMD_CAMPAIGN || o->cmd == CMD_RUN || o->cmd == CMD_LOCK;
    if (given[O_TO] && o->cmd != CMD_SWITCHOVER)
        return tool_usage_err(err, cap, "--to is for `elector switchover`");
    if (given[O_TIMEOUT] && o->cmd != CMD_SWITCHOVER && !waits)
        return tool_usage_err(
            err, cap,
            "--timeout is for campaign, run, lock (how long to wait) and "
            "switchover");
    if (given[O_NOWAIT] && !waits)
        return tool_usage_err(err, cap, "--no-wait is for campaign, run and lock");
    if (given[O_LIMIT] && o->cmd != CMD_LOCK)
        return tool_usage_err(err, cap, "-n/--limit is for `elector lock` (a semaphore)");
    if (o->limit > 1 && (o->restart || o->http))
        return tool_usage_err(err, cap,
                              "-n/--limit does not go with --restart or --http");
    if (o->no_wait && given[O_TIMEOUT])
        return tool_usage_err(err, cap, "--no-wait and --timeout exclude each other");
    if (given[O_FAILFAST] && !waits && o->cmd != CMD_OBSERVE)
        return tool_usage_err(
            err, cap,
            "--fail-fast is for campaign, run, lock and observe (leader and "
            "switchover always fail fast)");
    if (o->cmd == CMD_SWITCHOVER && !o->to)
        return tool_usage_err(
            err, cap,
            "switchover: missing --to VALUE (the value of the candidate "
            "that is to lead)");
    if (given[O_VALUE] && o->cmd != CMD_RUN && o->cmd != CMD_CAMPAIGN)
        return tool_usage_err(err, cap,
                              "--value is only for campaign and run (a lock's value "
                              "is empty, as etcdctl's)");
    if ((o->cert == NULL) != (o->key == NULL))
        return tool_usage_err(err, cap, "--cert and --key go together");
    return 0;
}

/* run's --grace against its TTL, as `elector timing` weighs them: a grace that
 * would have the guard stop the command between two renewals that succeed is
 * refused (the command would be stopped right after each election). */
static int check_grace(const tool_opts *o, bool supervised, char *err, size_t cap)
{
    if (!supervised || o->grace_ms < 0) return 0; /* run's default always fits */
    tool_timing_in in = {
        .ttl_ms = (o->ttl_s ? o->ttl_s : 10) * 1000,
        .grace_ms = o->grace_ms,
        .rtt_ms = o->rtt_ms,
        .election_timeout_ms = o->election_timeout_ms,
        .release = true,
        .grace_on_loss = o->grace_on_loss,
    };
    tool_timing_out fig;
    char why[512];
    if (!tool_timing_budget(&in, &fig, why, sizeof why)) return 0;
    return tool_usage_err(err, cap,
                          "%s (`elector timing --ttl %llds --grace %lldms` "
                          "shows the budget)",
                          why, (long long)(in.ttl_ms / 1000), (long long)o->grace_ms);
}

int tool_opts_check(tool_opts *o, const struct raw *r, char *err, size_t cap)
{
    int rc = check_command(o, err, cap);
    if (rc) return rc == 1 ? 0 : rc;
    /* The command-specific options, as given on the command line. */
    bool given[O_COUNT];
    for (int i = 0; i < O_COUNT; i++)
        given[i] = r->set[i].origin == ORIGIN_ARGV;
    bool supervised = o->argv && o->argv[0];
    if ((rc = check_given(o, given, supervised, err, cap))) return rc;
    if ((rc = check_health(o, given, err, cap))) return rc;
    if ((rc = check_grace(o, supervised, err, cap))) return rc;
    return check_waits(o, given, err, cap);
}
