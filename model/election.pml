/* SPDX-License-Identifier: MIT */
/*
 * elector's election protocol on etcd v3, as a Promela model (issue 40).
 * docs/MODEL.md says what is modelled, what is left out, and how each
 * assertion maps to the C code and its tests. scripts/model-check.sh runs it.
 *
 * Time is discrete: one step of Clock is one tick of etcd's clock. Each
 * client's clock (the session's deadline timer and the guard's) ticks with it,
 * or misses the tick (runs slow) at most DRIFT times in a validity window.
 * Every other step takes no time, and any number of them may fall between two
 * ticks, or none: messages are as slow as any schedule makes them.
 *
 * Each step names the C function it stands for (src/election/ unless a path is
 * given; tool/ is the `elector` tool).
 *
 * Planted faults (each must make Spin find a counterexample):
 *   -DNO_DRIFT_MARGIN     deadline = t_send + TTL (margin 0)         session.c margin_ns(), extend()
 *   -DNO_GUARD_STOP       the guard never kills the command           tool/supervise/guard.c guard_timers()
 *   -DRELEASE_BEFORE_REAP resign/revoke before the command is reaped  session.c session_die()
 *                         (manual_release), tool/candidate/decide.c app_step_down(),
 *                         tool/supervise/guard.c guard_main() -> leader_cmd.c release_lease()
 *   -DNO_RECHECK          elected without "session alive" re-check    wait.c become_leader()
 *   -DNO_FENCING          the resource takes any token                (the user's resource;
 *                                                                     fault/resource.c)
 *   -DNO_LEASE_END        with -DLIVENESS: no expiry, no revoke: the liveness run must fail
 * Configuration: -DTTL=.. -DDRIFT=.. -DSESS=.. -DCRASHES=.. -DRESIGNS=..;
 * -DLIVENESS for the liveness run (ltl "live", pan -a -f).
 */

#define N 3               /* slots; NCAND of them campaign */
#ifndef NCAND
#define NCAND 2
#endif
#ifndef TTL
#define TTL 3          /* granted TTL, in ticks */
#endif
#ifndef DRIFT
#define DRIFT 1        /* ticks a client clock may lose per validity window */
#endif
#ifdef NO_DRIFT_MARGIN
#define MARGIN 0
#else
#ifndef MARGIN
#define MARGIN DRIFT   /* margin_ns(): must cover the drift */
#endif
#endif
#ifndef SESS
#define SESS 1         /* sessions (LeaseGrant) per candidate: bounds revisions */
#endif
#ifndef CRASHES
#define CRASHES 1      /* SIGKILLed owners (the command and helper live on) */
#endif
#ifndef RESIGNS
#define RESIGNS 1
#endif
#define VALID (TTL - MARGIN) /* local ticks from t_send to the validity deadline */

/* ---- etcd: a linearizable store with revisions and leases ---------------- */
byte rev = 1;            /* header revision */
bool lalive[N];          /* lease of candidate i's current session exists */
byte lrem[N];            /* etcd ticks before etcd may expire it (0: it may) */
bool kex[N];             /* key P/<lease i> exists */
byte kcrev[N];           /* its create revision = the fencing token */

/* ---- clients ------------------------------------------------------------- */
bool sess[N];            /* session ALIVE (client view) */
byte dl[N];              /* local ticks left to the validity deadline (0: passed) */
byte ka[N];              /* 0 idle, 1 grant/keepalive answered ttl>0 in flight, 2 ttl<=0 */
byte kage[N];            /* local ticks since that request's t_send */
byte drs[N];             /* ticks lost since that t_send */
byte dr[N];              /* ticks lost since the t_send that set dl */
bool leader[N];          /* el->state == E_LEADER */
byte myrev[N];           /* el->rev */
bool cmd[N];             /* the `run` command (or the embedded owner's acting) */
byte tok[N];             /* the token the command writes with */
bool wrt[N];             /* the command has sent its write */
bool owed[N];            /* revoke_owed: release once the command is reaped */
bool crashed[N];
bool wantres[N];         /* the user asked to resign */
bool done[N];            /* no session left to try */
byte crashes = 0, resigns = 0;
byte lasttok = 0;        /* token of the latest ELECTED */
byte high = 0;           /* highest token the resource accepted */
chan wr[N] = [1] of { byte };   /* a write in flight to the resource */

/* leader.c elector__is_leader(): E_LEADER and session_view.c
 * elector__session_alive() (now < deadline); the driver's elector_is_leader() */
#define believes(i) (leader[i] && dl[i] > 0)
#define nbelieve (believes(0) + believes(1) + believes(2))
#define ncmd (cmd[0] + cmd[1] + cmd[2])

/* etcd deletes the key of lease i (expiry or revoke): one revision */
inline drop_lease(i) {
  if
  :: kex[i] -> kex[i] = 0; rev++
  :: else
  fi;
  lalive[i] = 0; lrem[i] = 0
}

/* session.c session_die(): elections told (session_notify.c
 * elector__session_notify_ended() -> campaign.c elector__campaign_session_ended()
 * -> election.c elector__lose() / elector__fail()); the revoke is owed
 * (revoke_owed) until the command is reaped (manual_release; then
 * session_close.c elector__session_revoke()). */
inline session_die(i) {
  sess[i] = 0; leader[i] = 0; ka[i] = 0; kage[i] = 0; drs[i] = 0; owed[i] = 1
}

/* ---- the session: session.c renew_fired() / keepalive_done() ------------- */
proctype Keepalive(byte i)
{
  { do
    :: atomic { sess[i] && ka[i] == 0 && dl[i] < VALID ->   /* renew_fired */
         kage[i] = 0; drs[i] = 0;
         if
         :: lalive[i] -> lrem[i] = TTL; ka[i] = 1   /* etcd counts from >= t_send */
         :: else -> ka[i] = 2                      /* "requested lease not found" */
         fi }
    :: atomic { sess[i] && ka[i] == 1 ->             /* keepalive_done -> extend() */
         if
         :: VALID > kage[i] && VALID - kage[i] > dl[i] ->
              dl[i] = VALID - kage[i]; dr[i] = drs[i]
         :: else
         fi;
         ka[i] = 0; kage[i] = 0; drs[i] = 0 }
#ifndef LIVENESS
    :: atomic { sess[i] && ka[i] == 1 -> ka[i] = 0; kage[i] = 0; drs[i] = 0 }  /* answer lost: retried */
#endif
    :: atomic { sess[i] && ka[i] == 2 -> session_die(i) }  /* ELECTOR_ELEASE */
    od } unless { crashed[i] || done[i] }
}

/* ---- a candidate: campaign.c elector__campaign() .. wait.c become_leader() .. resign */
proctype Candidate(byte i)
{
  byte s = 0;
  byte res, pred, prev;
  { do
    :: s < SESS ->
       s++;
       !lalive[i] && !cmd[i] && !owed[i];  /* the last lease is gone, its command reaped */
       atomic { /* session.c send_grant(): etcd grants at >= t_send */
         lalive[i] = 1; lrem[i] = TTL; ka[i] = 1; kage[i] = 0; drs[i] = 0 }
       atomic { /* session.c grant_done() -> granted() -> extend() */
         if
         :: VALID > kage[i] -> sess[i] = 1; dl[i] = VALID - kage[i]; dr[i] = drs[i]
         :: else -> owed[i] = 1   /* confirm_late_grant: too late, revoke it */
         fi;
         ka[i] = 0 };
       if
       :: !sess[i] -> goto next
       :: else
       fi;
       /* campaign.c elector__send_campaign(): Txn(CreateRevision(K)==0 ? Put(K, lease) : Range(K)) */
       atomic {
         if
         :: sess[i] && lalive[i] ->
              if
              :: !kex[i] -> rev++; kex[i] = 1; kcrev[i] = rev
              :: else
              fi;
              myrev[i] = kcrev[i]
         :: else -> session_die(i); goto next  /* lease not found / session over */
         fi }
check: /* wait.c elector__send_check() with its txn_check():
        * Txn(CreateRevision(K)==myRev ? Range(P, max_create_rev=myRev-1)) */
       atomic {
         if
         :: kex[i] && kcrev[i] == myrev[i] ->
              pred = N; prev = 0;
              if :: kex[0] && kcrev[0] < myrev[i] && kcrev[0] > prev -> pred = 0; prev = kcrev[0] :: else fi;
              if :: kex[1] && kcrev[1] < myrev[i] && kcrev[1] > prev -> pred = 1; prev = kcrev[1] :: else fi;
              if :: kex[2] && kcrev[2] < myrev[i] && kcrev[2] > prev -> pred = 2; prev = kcrev[2] :: else fi;
              res = (pred == N -> 0 : 1)
         :: else -> res = 2
         fi }
       /* wait.c check_done(), any time later */
       if
       :: res == 2 -> /* elector__fail(): "our key vanished while waiting"; here the session ends too */
            atomic { if :: sess[i] -> session_die(i) :: else fi }; goto next
       :: res == 1 -> /* wait_behind(): watch the predecessor until DELETE (watch_cb) */
            if
            :: !kex[pred] || kcrev[pred] != prev -> goto check
            :: !sess[i] -> goto next   /* session ended: FAILED */
            fi
       :: res == 0 -> /* become_leader(): elector__session_alive() re-checked */
            atomic {
#ifndef NO_RECHECK
              if
              :: !(sess[i] && dl[i] > 0) -> if :: sess[i] -> session_die(i) :: else fi; goto next
              :: else
              fi;
#endif
              /* a campaign returns elected only while its own key exists */
              assert(kex[i] && kcrev[i] == myrev[i]);
              /* tokens strictly increase */
              assert(myrev[i] > lasttok);
              lasttok = myrev[i];
              leader[i] = 1;
              cmd[i] = 1; tok[i] = myrev[i]; wrt[i] = 0 }  /* ELECTED: the guard starts the command */
       fi;
       /* leading */
       do
       :: !leader[i] -> break                      /* elector__lose(): LOST at the deadline, or ELEASE */
       :: atomic { leader[i] && !(kex[i] && kcrev[i] == myrev[i]) ->
            session_die(i) }  /* wait.c watch_cb() DELETE "our key .. was deleted", check_done() "our key is gone" */
       :: atomic { leader[i] && wantres[i] -> wantres[i] = 0 } ->
            /* under `run`, tool/candidate/decide.c app_step_down(): app_stop_child(),
             * the tree reaped, then resign_now() -> elector_resign() */
#ifndef RELEASE_BEFORE_REAP
            cmd[i] = 0;
#endif
            atomic { /* leader.c elector__resign() -> resign_send() -> pacer.c elector__delete_key()
                      * (pacer.c elector__send_delete()): Txn(CreateRevision(K)==myRev ?
                      * DeleteRange(K)); then the session closed: revoke */
              if :: kex[i] && kcrev[i] == myrev[i] -> kex[i] = 0; rev++ :: else fi;
              leader[i] = 0;
              if :: sess[i] -> session_die(i) :: else fi }
            break
       od;
next:  res = 0; pred = 0; prev = 0
    :: else -> break
    od;
    done[i] = 1
  } unless { crashed[i] }
}

/* ---- the resource: accepts only tokens >= the highest seen (the user's; the
 * fault suite's fault/resource.c; or a guarded Txn, leader.c) -------------- */
active proctype Resource()
{
  byte t;
end:
  do
  :: wr[0] ? t -> goto take
  :: wr[1] ? t -> goto take
  :: wr[2] ? t ->
take:  atomic {
#ifndef NO_FENCING
         if :: t >= high -> high = t :: else fi   /* a lower token is refused */
#else
         /* the resource never accepts a lower token */
         assert(t >= high); high = t
#endif
       }
  od
}

/* ---- the guard (`run`), the release helper, and the command's writes ---- */
#ifndef RELEASE_BEFORE_REAP
#define REAPED(i) !cmd[i]
#else
#define REAPED(i) true
#endif
#ifndef LIVENESS
#define WRITE(i) :: atomic { cmd[i] && !wrt[i] -> wrt[i] = 1; wr[i] ! tok[i] }  /* the command writes once */
#define LOSTREVOKE(i) :: atomic { owed[i] && !cmd[i] -> owed[i] = 0 }    /* revoke lost: TTL decides */
#else
#define WRITE(i)
#define LOSTREVOKE(i)
#endif
#ifndef NO_LEASE_END
#define REVOKE(i) :: atomic { owed[i] && REAPED(i) -> owed[i] = 0; if :: lalive[i] -> drop_lease(i) :: else fi }
#else
#define REVOKE(i)
#endif
/* tool/supervise/guard.c guard_apply()/guard_read() -> stop_for(), guard_timers():
 * a command of a non-leader (LOST, or its elector gone) is stopped within the
 * grace; the revoke owed (session_die with manual_release, then
 * elector__session_revoke() when the tool closes the session; guard_main() ->
 * leader_cmd.c release_lease() after its elector died; for an embedded owner,
 * whose acting ends with its process, release_helper.c socket_closed() ->
 * revoke_now()) comes only after the tree is reaped. */
#define guard_steps(i) \
  WRITE(i) \
  :: atomic { cmd[i] && !leader[i] -> cmd[i] = 0 } \
  REVOKE(i) \
  LOSTREVOKE(i)

active proctype Guard()
{
end:
  do
  guard_steps(0)
  guard_steps(1)
  guard_steps(2)
  od
}

/* ---- time: etcd's clock, the clients' clocks, expiry, faults ------------ */
#ifndef NO_GUARD_STOP
#define GUARD_KILL(i) cmd[i] = 0   /* guard_timers(): SIGKILL at the deadline */
#else
#define GUARD_KILL(i) skip
#endif
inline tick_client(i) {
  if
  :: (dl[i] > 0 || ka[i] != 0) && dr[i] < DRIFT && drs[i] < DRIFT ->
       dr[i]++; if :: ka[i] != 0 -> drs[i]++ :: else fi  /* this clock runs slow */
  :: true ->
       if :: dl[i] > 0 -> dl[i]-- :: else fi;
       if :: ka[i] != 0 && kage[i] < VALID -> kage[i]++ :: else fi
  fi;
  if
  :: dl[i] == 0 ->
       if :: sess[i] -> session_die(i) :: else fi;   /* session.c deadline_fired() -> expire() */
       GUARD_KILL(i);
       if :: ka[i] == 0 -> dr[i] = 0 :: else fi
  :: else
  fi
}

#ifdef LIVENESS
#define TICK timeout
#else
#define TICK true
#endif

/* etcd's lessor: expiry is allowed once the TTL has passed on etcd's clock */
#ifndef NO_LEASE_END
#define etcd_expire(i) \
  :: atomic { lalive[i] && lrem[i] == 0 -> drop_lease(i) }
#else
#define etcd_expire(i)
#endif
/* the owner SIGKILLed (its command and the guard or helper live on); resign */
#define fault(i) \
  :: atomic { TICK && crashes < CRASHES && !crashed[i] && !done[i] -> \
       crashes++; crashed[i] = 1; sess[i] = 0; leader[i] = 0; ka[i] = 0; kage[i] = 0; drs[i] = 0; owed[i] = 1 } \
  :: atomic { TICK && resigns < RESIGNS && leader[i] -> resigns++; wantres[i] = 1 }

active proctype Clock()
{
end:
  do
  :: atomic { TICK ->
       if :: lrem[0] > 0 -> lrem[0]-- :: else fi;
       if :: lrem[1] > 0 -> lrem[1]-- :: else fi;
       if :: lrem[2] > 0 -> lrem[2]-- :: else fi;
       tick_client(0); tick_client(1); tick_client(2) }
  etcd_expire(0)
  etcd_expire(1)
  etcd_expire(2)
  fault(0)
  fault(1)
  fault(2)
  od
}

/* ---- the invariants, checked in every state ----------------------------- */
active proctype Monitor()
{
end:
  atomic {
    !( nbelieve <= 1                                   /* one leader at a time */
       && (!believes(0) || (lalive[0] && kex[0] && kcrev[0] == myrev[0]))
       && (!believes(1) || (lalive[1] && kex[1] && kcrev[1] == myrev[1]))
       && (!believes(2) || (lalive[2] && kex[2] && kcrev[2] == myrev[2]))
       && (!cmd[0] || dl[0] > 0) && (!cmd[1] || dl[1] > 0) && (!cmd[2] || dl[2] > 0)
       && ncmd <= 1)                                   /* commands never overlap */
    -> assert(nbelieve <= 1);
       assert(!believes(0) || (lalive[0] && kex[0] && kcrev[0] == myrev[0]));
       assert(!believes(1) || (lalive[1] && kex[1] && kcrev[1] == myrev[1]));
       assert(!believes(2) || (lalive[2] && kex[2] && kcrev[2] == myrev[2]));
       assert(!cmd[0] || dl[0] > 0);   /* a command never runs past its deadline */
       assert(!cmd[1] || dl[1] > 0);
       assert(!cmd[2] || dl[2] > 0);
       assert(ncmd <= 1)
  }
}

init
{
  atomic {
    run Candidate(0); run Keepalive(0);
    run Candidate(1); run Keepalive(1);
#if NCAND == 3
    run Candidate(2); run Keepalive(2)
#else
    done[2] = 1
#endif
  }
}

#ifdef LIVENESS
/* with etcd up and a candidate alive, someone eventually leads */
#define anyalive ((!crashed[0] && !done[0]) || (!crashed[1] && !done[1]) || (!crashed[2] && !done[2]))
ltl live { [] <> (nbelieve > 0 || !anyalive) }
#endif
