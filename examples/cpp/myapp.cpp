// SPDX-License-Identifier: MIT
// MyApp: an application instance that runs for leadership and does its
// singleton work only while it leads, fenced by its token: the shape of the
// etcd-cpp-apiv3 "MyApp" (StartElection / WatchForLeaderChange) on elector's
// C++ API (elector/elector.hpp). No keepalive thread of ours, no watcher to
// restart: the driver keeps the lease alive on its own thread, and a leader
// that lost its lease cannot write (put_if_leader is one etcd Txn guarded by
// the token).
//
//   myapp ID [ENDPOINTS]        e.g.  myapp node-1 127.0.0.1:2379
//
// Prints "I am the leader now" when elected. Ctrl-C (or SIGTERM) resigns, so
// that another instance takes over at once, and exits.
#include <elector/elector.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <pthread.h>
#include <signal.h>

namespace
{

const char *const election_name = "myapp-election";

class MyApp
{
  public:
    MyApp(std::string id, const std::string &endpoints)
        : id_(std::move(id)), client_(elector::client::threaded(Options(endpoints)))
    {
    }
    ~MyApp()
    {
        Stop();
    }

    // Campaigns in the background, again after each loss, until Stop().
    void StartElection()
    {
        worker_ = std::thread([this] { Run(); });
    }

    // Reports every change of leader, whoever it is.
    void WatchForLeaderChange()
    {
        watch_ = client_.observe(election_name, [this](const elector::event &ev) {
            std::lock_guard<std::mutex> g(out_);
            if (ev.type == ELECTOR_EV_LEADER)
                std::cout << "[" << id_ << "] leader is " << ev.value << " (token "
                          << ev.token << ")" << std::endl;
            else if (ev.type == ELECTOR_EV_NO_LEADER)
                std::cout << "[" << id_ << "] no leader" << std::endl;
        });
    }

    void Stop()
    {
        {
            std::lock_guard<std::mutex> g(mu_);
            if (stop_) return;
            stop_ = true;
            if (election_) election_->resign(); // ends a campaign under way
        }
        cv_.notify_all();
        if (worker_.joinable()) worker_.join();
    }

  private:
    static elector::client_options Options(const std::string &endpoints)
    {
        elector::client_options o;
        o.endpoints = endpoints;
        return o;
    }

    void Say(const std::string &s)
    {
        std::lock_guard<std::mutex> g(out_);
        std::cout << "[" << id_ << "] " << s << std::endl;
    }

    bool Stopping()
    {
        std::lock_guard<std::mutex> g(mu_);
        return stop_;
    }

    void Run()
    {
        while (!Stopping()) {
            try {
                // snippet: cpp
                // A new session (lease) per round: after a loss, the old
                // one may be gone.
                elector::session_options so;
                so.release_on_exit = true; // kill -9: the next one leads in ms
                auto session = std::make_shared<elector::session>(client_, so);
                {
                    std::lock_guard<std::mutex> g(mu_);
                    if (stop_) break;
                    election_ =
                        std::make_shared<elector::election>(*session, election_name);
                }
                election_->on_lost([this](const elector::event &ev) {
                    Say("leadership lost: " + ev.detail);
                    cv_.notify_all();
                });
                elector::leadership lead = election_->campaign(id_);
                Say("I am the leader now (token " + std::to_string(lead.token()) + ")");
                DoWorkWhileLeader(lead);
                if (Stopping()) {
                    lead.resign();
                    Say("resigned");
                }
                // end snippet
            } catch (const elector::error &e) {
                if (!Stopping())
                    Say(std::string("election: ") + e.what() + "; again in 1 s");
                std::unique_lock<std::mutex> g(mu_);
                cv_.wait_for(g, std::chrono::seconds(1), [this] { return stop_; });
            }
            std::lock_guard<std::mutex> g(mu_);
            election_.reset();
        }
    }

    // The singleton work: each write carries the fencing token and is made
    // only if we still lead, as etcd sees it.
    void DoWorkWhileLeader(elector::leadership &lead)
    {
        for (long tick = 1; !Stopping(); tick++) {
            std::string v = id_ + " tick " + std::to_string(tick) + " token " +
                            std::to_string(lead.token());
            std::error_code ec;
            if (!lead.put_if_leader("myapp/work", v, std::chrono::seconds(3), ec)) {
                Say(ec ? "work not written: " + ec.message()
                       : std::string("not the leader any more: work stopped"));
                if (!ec) return;
            } else {
                Say("work: " + v);
            }
            std::unique_lock<std::mutex> g(mu_);
            cv_.wait_for(g, std::chrono::seconds(1),
                         [&] { return stop_ || !lead.is_leader(); });
            if (!lead.is_leader() && !stop_) return;
        }
    }

    std::string id_;
    elector::client client_;
    elector::observer watch_;
    std::shared_ptr<elector::election> election_;
    std::thread worker_;
    std::mutex mu_, out_;
    std::condition_variable cv_;
    bool stop_ = false;
};

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || std::string(argv[1]).empty() || argv[1][0] == '-') {
        std::cerr << "usage: myapp ID [ENDPOINTS]\n"
                     "  campaigns for leadership of \""
                  << election_name
                  << "\" on etcd (default 127.0.0.1:2379);\n"
                     "  Ctrl-C resigns and exits\n";
        return 2;
    }
    // SIGINT and SIGTERM go to sigwait() below, in no other thread (the
    // driver's threads inherit this mask).
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        MyApp app(argv[1], argc > 2 ? argv[2] : "127.0.0.1:2379");
        app.WatchForLeaderChange();
        app.StartElection();
        int sig = 0;
        sigwait(&set, &sig);
        app.Stop();
    } catch (const std::exception &e) {
        std::cerr << "myapp: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
