// SPDX-License-Identifier: MIT
// The C++ API (elector/elector.hpp) against real etcd: threaded and embedded
// clients, leadership's destructor, on_lost, put_if_leader after a revoke,
// observe, the mutex from 4 threads, errors (category, error_code overloads),
// and destructors under exceptions thrown from user code and callbacks.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include "elector/elector.hpp"

// testlib.h is C11: its _Noreturn is [[noreturn]] here.
#define _Noreturn [[noreturn]]
extern "C" {
#include "etcd_harness.h"
#include "testlib.h"
}

using namespace std::chrono_literals;

#define CHECK(cond) ASSERT(cond)
#define CHECK_EQ(a, b)                                                                   \
    do {                                                                                 \
        auto ca_ = (a);                                                                  \
        auto cb_ = (b);                                                                  \
        if (!(ca_ == cb_))                                                               \
            tl_fail_num(__FILE__, __LINE__, "CHECK_EQ", #a, #b, (long double)ca_,        \
                        (long double)cb_, 0);                                            \
    } while (0)

static eh_cluster *start1()
{
    eh_opts o{};
    o.members = 1;
    eh_cluster *c = eh_start(&o);
    ASSERT_NOT_NULL(c);
    return c;
}

static elector::client_options opts(eh_cluster *c)
{
    elector::client_options o;
    o.endpoints = eh_endpoints(c);
    o.dial_timeout = 1000ms;
    o.request_timeout = 2000ms;
    return o;
}

static std::string etcd_get(eh_cluster *c, const char *key)
{
    char *out = nullptr;
    CHECK(eh_etcdctl(c, &out, "get", key, "--print-value-only", (char *)nullptr) == 0);
    std::string s = out ? out : "";
    free(out);
    return s;
}

template <class F> static bool eventually(F f, std::chrono::milliseconds limit = 5000ms)
{
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return f();
}

TEST(threaded_campaign_leader_observe_put_and_destructor_resigns)
{
    eh_cluster *c = start1();
    {
        auto cl = elector::client::threaded(opts(c));
        elector::session s(cl, {std::chrono::seconds(5)});
        CHECK(s.alive());
        std::atomic<int> leaders{0}, none{0};
        auto obs = cl.observe("cpp", [&](const elector::event &ev) {
            if (ev.type == ELECTOR_EV_LEADER) leaders++;
            if (ev.type == ELECTOR_EV_NO_LEADER) none++;
        });
        elector::election e(s, "cpp");
        CHECK(!e.is_leader());
        CHECK(!cl.leader("cpp").has_value());
        {
            elector::leadership l = e.campaign("node-1", 5s);
            CHECK(l.valid());
            CHECK(l.is_leader());
            CHECK(e.is_leader());
            CHECK(l.token() > 0);
            CHECK_EQ(l.token(), e.token());
            auto who = cl.leader("cpp");
            CHECK(who.has_value());
            CHECK(who->value == "node-1");
            CHECK_EQ(who->token, l.token());
            CHECK(l.put_if_leader("cpp-res", "v1"));
            CHECK(etcd_get(c, "cpp-res") == "v1\n");
            // Moved: the moved-from one resigns nothing.
            elector::leadership m = std::move(l);
            CHECK(!l.valid());
            CHECK(m.is_leader());
            CHECK(eventually([&] { return leaders.load() >= 1; }));
        } // ~leadership resigns
        CHECK(eventually([&] { return !cl.leader("cpp").has_value(); }));
        CHECK(!e.is_leader());
        CHECK(eventually([&] { return none.load() >= 1; }));
        CHECK(!e.put_if_leader("cpp-res", "v2"));
        CHECK(etcd_get(c, "cpp-res") == "v1\n");
    }
    eh_stop(c);
}

TEST(on_lost_and_put_if_leader_after_lease_revoke)
{
    eh_cluster *c = start1();
    {
        auto cl = elector::client::threaded(opts(c));
        elector::session s(cl, {std::chrono::seconds(10)});
        elector::election e(s, "rev");
        std::atomic<int> lost{0};
        e.on_lost([&](const elector::event &ev) {
            CHECK(ev.type == ELECTOR_EV_LOST);
            lost++;
        });
        auto l = e.campaign("x");
        char lease[32];
        snprintf(lease, sizeof(lease), "%llx", (unsigned long long)s.lease());
        CHECK(eh_etcdctl(c, nullptr, "lease", "revoke", lease, (char *)nullptr) == 0);
        std::error_code ec;
        bool wrote = l.put_if_leader("after", "no", 3s, ec);
        CHECK(!ec);
        CHECK(!wrote);
        CHECK(etcd_get(c, "after").empty());
        CHECK(eventually([&] { return lost.load() == 1; }));
        CHECK(!l.is_leader());
    }
    eh_stop(c);
}

TEST(embedded_client_in_the_callers_loop)
{
    eh_cluster *c = start1();
    {
        auto cl = elector::client::embedded(opts(c));
        CHECK(cl.fd() >= 0);
        elector::session s(cl, {std::chrono::seconds(5)});
        elector::election e(s, "emb");
        std::vector<std::string> seen;
        e.on_event([&](const elector::event &ev) { seen.push_back(ev.type_name()); });
        auto l = e.campaign("me", 5s);
        CHECK(l.is_leader());
        CHECK(l.put_if_leader("emb-res", "1"));
        CHECK(cl.leader("emb")->value == "me");
        l.resign(3s);
        CHECK(!l.valid());
        CHECK(!cl.leader("emb").has_value());
        cl.run_once(50ms);
        bool elected = false, resigned = false;
        for (auto &n : seen) {
            elected |= n == "elected";
            resigned |= n == "resigned";
        }
        CHECK(elected);
        CHECK(resigned);
        // The caller's own poll() loop on fd(): an observer sees someone
        // else's key lead, with no blocking call of ours.
        std::string leader_value;
        auto obs = cl.observe("emb", [&](const elector::event &ev) {
            if (ev.type == ELECTOR_EV_LEADER) leader_value = ev.value;
        });
        CHECK(eh_etcdctl(c, nullptr, "put", "emb/other", "them", (char *)nullptr) == 0);
        auto end = std::chrono::steady_clock::now() + 5s;
        while (leader_value.empty() && std::chrono::steady_clock::now() < end) {
            struct pollfd p = {cl.fd(), POLLIN, 0};
            int64_t t = cl.timeout();
            poll(&p, 1, t < 0 || t > 100 ? 100 : (int)t);
            cl.process();
        }
        CHECK(leader_value == "them");
    }
    eh_stop(c);
}

// The C options auto_sync_interval_ms and password_file, from C++: a login
// with the password from a file only, and the endpoint list synced from
// MemberList (a closed port given after the member is dropped).
TEST(password_file_and_auto_sync_interval)
{
    eh_opts eo{};
    eo.members = 1;
    eo.auth = 1;
    eh_cluster *c = eh_start(&eo);
    ASSERT_NOT_NULL(c);
    std::string pf = std::string(eh_dir(c)) + "/password";
    FILE *f = fopen(pf.c_str(), "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "%s\n", EH_USER_PASSWORD);
    fclose(f);
    std::string name = std::string(EH_USER_PREFIX) + "pf";
    {
        elector::client_options o = opts(c);
        o.user = EH_USER;
        o.password_file = pf;
        o.auto_sync_interval = 200ms;
        // A closed port after the member: the member list leaves it out.
        o.endpoints += ",127.0.0.1:1";
        auto cfg = elector::detail::make_config(o);
        CHECK(cfg.auto_sync_interval_ms == 200);
        CHECK(std::string(cfg.password_file) == pf);
        auto cl = elector::client::embedded(o);
        CHECK(!cl.leader(name).has_value()); // logged in with the file's password
        auto end = std::chrono::steady_clock::now() + 5s;
        elector_etcd_stats st{};
        while (std::chrono::steady_clock::now() < end) {
            cl.run_once(50ms);
            elector_etcd_get_stats(cl.native(), &st);
            if (st.endpoint_syncs >= 1 && st.requests[ELECTOR_RPC_MEMBER_LIST] >= 2)
                break;
        }
        tl_log("endpoint syncs after auto_sync_interval 200 ms: %llu (MemberList %llu, "
               "errors %llu)",
               (unsigned long long)st.endpoint_syncs,
               (unsigned long long)st.requests[ELECTOR_RPC_MEMBER_LIST],
               (unsigned long long)st.errors[ELECTOR_RPC_MEMBER_LIST]);
        CHECK(st.endpoint_syncs >= 1);
        CHECK(st.requests[ELECTOR_RPC_MEMBER_LIST] >= 2);
        CHECK(!cl.leader(name).has_value());
    }
    {
        // A wrong password in the file: a clear error, not a login.
        f = fopen(pf.c_str(), "w");
        ASSERT_NOT_NULL(f);
        fprintf(f, "wrong\n");
        fclose(f);
        elector::client_options o = opts(c);
        o.user = EH_USER;
        o.password_file = pf;
        auto cl = elector::client::embedded(o);
        std::error_code ec;
        cl.leader(name, 3s, ec);
        tl_log("wrong password in the file: %s", ec.message().c_str());
        CHECK(ec);
    }
    eh_stop(c);
}

TEST(errors_category_and_error_code_overloads)
{
    elector::client_options o;
    o.endpoints = "http://[::1";
    bool thrown = false;
    try {
        auto cl = elector::client::threaded(o);
    } catch (const elector::error &e) {
        thrown = true;
        CHECK(e.code().category() == elector::category());
        CHECK_EQ(e.value(), (int)ELECTOR_EINVAL);
        CHECK(std::string(e.code().category().name()) == "elector");
        CHECK(e.code().message() == "invalid argument");
    }
    CHECK(thrown);
    std::error_code ec;
    auto cl = elector::client::embedded(o, ec);
    CHECK(ec.value() == ELECTOR_EINVAL);
    CHECK(!cl.valid());
    // etcd down: a clear error, no terminate.
    o.endpoints = "127.0.0.1:1";
    o.dial_timeout = 300ms;
    auto down = elector::client::threaded(o);
    elector::session_options so;
    so.grant_timeout = 3s;
    elector::session s(down, so, ec);
    CHECK(ec);
    CHECK(!s.valid());
    thrown = false;
    try {
        elector::session s2(down, so);
    } catch (const std::system_error &e) {
        thrown = true;
        tl_log("session with etcd down: %s", e.what());
    }
    CHECK(thrown);
}

// Exceptions thrown by user code: from callbacks (caught, handed to the
// handler, the driver goes on), and through scopes holding every object
// (destructors resign and free; valgrind sees no leak).
TEST(exceptions_from_user_code_and_callbacks)
{
    eh_cluster *c = start1();
    std::atomic<int> handled{0};
    {
        auto cl = elector::client::threaded(opts(c));
        cl.on_callback_error([&](std::exception_ptr ep) {
            try {
                std::rethrow_exception(ep);
            } catch (const std::runtime_error &e) {
                CHECK(std::string(e.what()) == "from a callback");
                handled++;
            }
        });
        elector::session s(cl);
        elector::election e(s, "exc");
        e.on_event(
            [](const elector::event &) { throw std::runtime_error("from a callback"); });
        auto obs = cl.observe("exc", [](const elector::event &) { throw 42; });
        bool caught = false;
        try {
            auto l = e.campaign("v", 5s);
            CHECK(l.is_leader());
            throw std::runtime_error("user code");
        } catch (const std::runtime_error &) {
            caught = true;
        }
        CHECK(caught);
        // The leadership's destructor resigned during the unwinding.
        CHECK(eventually([&] { return !cl.leader("exc").has_value(); }));
        CHECK(eventually([&] { return handled.load() >= 2; })); // ELECTED, RESIGNED
        // Still usable.
        auto l2 = e.campaign("w", 5s);
        CHECK(l2.is_leader());
    }
    // Every object of a client in one scope left by an exception.
    bool caught = false;
    try {
        auto cl = elector::client::embedded(opts(c));
        elector::session s(cl);
        elector::election e(s, "exc2");
        auto l = e.campaign("v", 5s);
        throw std::logic_error("unwind");
    } catch (const std::logic_error &) {
        caught = true;
    }
    CHECK(caught);
    CHECK(eventually([&] {
        auto cl = elector::client::embedded(opts(c));
        return !cl.leader("exc2").has_value();
    }));
    eh_stop(c);
}

TEST_WITH_TIMEOUT(mutex_from_four_threads, 180)
{
    eh_cluster *c = start1();
    {
        auto cl = elector::client::threaded(opts(c));
        std::atomic<int> inside{0}, max_inside{0}, total{0};
        std::vector<std::thread> th;
        for (int i = 0; i < 4; i++)
            th.emplace_back([&] {
                elector::mutex m(cl, "cpp-lock");
                for (int r = 0; r < 10; r++) {
                    std::lock_guard<elector::mutex> g(m);
                    int n = ++inside;
                    if (n > max_inside) max_inside = n;
                    total++;
                    inside--;
                }
            });
        for (auto &t : th)
            t.join();
        CHECK_EQ(total.load(), 40);
        CHECK_EQ(max_inside.load(), 1);
    }
    eh_stop(c);
}

// etcd-cpp-apiv3 #190/#192 (a destructor deadlocked after a reconnect) and
// #67/#235 (terminate when the server is down or after a cluster restart):
// the member goes down while we lead (on_lost comes, nothing throws out of
// the library), comes back, a new session leads again, and every destructor
// returns.
TEST_WITH_TIMEOUT(server_restart_while_leading_then_destructors, 90)
{
    eh_cluster *c = start1();
    {
        auto cl = elector::client::threaded(opts(c));
        std::atomic<int> lost{0};
        {
            elector::session s(cl, {std::chrono::seconds(2)});
            elector::election e(s, "restart");
            e.on_lost([&](const elector::event &) { lost++; });
            auto l = e.campaign("a", 5s);
            CHECK(l.is_leader());
            CHECK(eh_member_stop(c, 0) == 0);
            CHECK(eventually([&] { return lost.load() == 1; }, 10000ms));
            CHECK(!l.is_leader());
            std::error_code ec;
            CHECK(!l.put_if_leader("k", "v", 1s, ec));
            CHECK(eh_member_restart(c, 0) == 0);
            CHECK(eh_wait_healthy(c, 0, 10) == 0);
        } // ~leadership, ~election, ~session after the reconnect
        // TTL 5 s: etcd has just restarted, and on a busy machine its first
        // grant may take longer than a 2 s lease lasts (the session would then
        // be granted already past its validity deadline).
        elector::session s2(cl, {std::chrono::seconds(5)});
        elector::election e2(s2, "restart");
        auto l2 = e2.campaign("b", 10s);
        CHECK(l2.is_leader());
        CHECK(l2.put_if_leader("k", "v2"));
    }
    CHECK(etcd_get(c, "k") == "v2\n");
    eh_stop(c);
}

// A write under the election's own prefix throws, saying why (the README's
// example once wrote NAME/state); a key without a lease first under NAME/ is
// ELECTOR_EBLOCKED from leader(), named in the exception.
TEST(own_prefix_writes_and_keys_without_a_lease)
{
    eh_cluster *c = start1();
    {
        auto cl = elector::client::threaded(opts(c));
        elector::session s(cl, {std::chrono::seconds(5)});
        elector::election e(s, "cpp-own");
        elector::leadership l = e.campaign("a", 5s);
        std::string what;
        try {
            l.put_if_leader("cpp-own/state", "v");
        } catch (const elector::error &err) {
            what = err.what();
            CHECK_EQ(err.value(), ELECTOR_EINVAL);
        }
        tl_log("%s", what.c_str());
        CHECK(what.find("the key is under the election's own prefix 'cpp-own/'") !=
              std::string::npos);
        CHECK(l.put_if_leader("cpp-own-state", "v"));
        CHECK(eh_etcdctl(c, nullptr, "put", "cpp-blk/state", "x", (char *)nullptr) == 0);
        std::error_code ec;
        CHECK(!cl.leader("cpp-blk", 3s, ec).has_value());
        CHECK_EQ(ec.value(), ELECTOR_EBLOCKED);
        what.clear();
        try {
            cl.leader("cpp-blk");
        } catch (const elector::error &err) {
            what = err.what();
        }
        tl_log("%s", what.c_str());
        CHECK(
            what.find("a key without a lease, cpp-blk/state, blocks election cpp-blk") !=
            std::string::npos);
    }
    eh_stop(c);
}
