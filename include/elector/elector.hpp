// SPDX-License-Identifier: MIT
/// @file
/// elector — C++17 API, header-only, over the C library (elector/etcd.h and
/// elector/election.h). Nothing beyond the C library and the standard library.
///
/// @code
///   auto c = elector::client::threaded({"127.0.0.1:2379"});  // loop on its own thread
///   elector::session s(c);                                    // lease, kept alive
///   elector::election e(s, "my-service");
///   e.on_lost([](const elector::event &ev) { ... });          // callback thread
///   elector::leadership l = e.campaign("node-1");             // blocks until elected
///   if (l.put_if_leader("config", "v2")) { ... }              // fenced by the token
///   // ~leadership resigns
/// @endcode
///
/// Two ways to run the loop:
///   - client::threaded(): a C client with own_thread (its loop on a thread of
///     its own). Every call may come from any thread; callbacks run on the
///     client's callback thread.
///   - client::embedded(): the caller's own loop polls fd() and calls process();
///     callbacks run inside process() (or a blocking call). One thread only.
///
/// Ownership: a session keeps its client alive, an election its session, a
/// leadership its election (shared state), so any destruction order is safe.
/// Do not drop the last reference to an object from inside its own callback.
///
/// Errors: elector::error (a std::system_error, category elector::category(),
/// value an ELECTOR_E* code). Every throwing call that talks to etcd has an
/// overload taking std::error_code& that does not throw. Exceptions thrown by
/// user callbacks never cross the C library: they are caught and handed to the
/// client's callback-error handler (default: a line on stderr).
#ifndef ELECTOR_ELECTOR_HPP
#define ELECTOR_ELECTOR_HPP

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "elector/election.h"

namespace elector
{

// ---- errors ---------------------------------------------------------------------

/// The error category of elector's codes (elector::category()).
class error_category_impl final : public std::error_category
{
  public:
    /// "elector"
    const char *name() const noexcept override
    {
        return "elector";
    }
    /// elector_strerror(ev)
    std::string message(int ev) const override
    {
        return elector_strerror(ev);
    }
};

/// The category of every std::error_code this API sets: values are ELECTOR_E* codes.
inline const std::error_category &category() noexcept
{
    static const error_category_impl cat;
    return cat;
}

/// An ELECTOR_E* code as a std::error_code of category().
inline std::error_code make_error_code(int code) noexcept
{
    return std::error_code(code, category());
}

/// What the throwing calls throw: a std::system_error whose code is an
/// ELECTOR_E* code of category(); what() adds the context (the client's detail
/// text, a key without a lease that blocks an election, ...).
class error : public std::system_error
{
  public:
    /// code: an ELECTOR_E* code; what: the context.
    explicit error(int code, const std::string &what = "")
        : std::system_error(make_error_code(code), what)
    {
    }
    /// The ELECTOR_E* code.
    int value() const noexcept
    {
        return code().value();
    }
};

namespace detail
{
inline void check(int rc, const char *what)
{
    if (rc < 0) throw error(rc, what);
}
inline bool set(std::error_code &ec, int rc) noexcept
{
    if (rc < 0)
        ec = make_error_code(rc);
    else
        ec.clear();
    return rc >= 0;
}
inline int64_t ms(std::chrono::milliseconds t) noexcept
{
    return t.count() < 0 ? -1 : static_cast<int64_t>(t.count());
}
} // namespace detail

/// No limit, for the timeouts below.
inline constexpr std::chrono::milliseconds forever{-1};

// ---- events ---------------------------------------------------------------------

/// An owned copy of elector_event.
struct event {
    elector_event_type type{}; ///< what happened (elector_event.type)
    int reason = 0;            ///< an ELECTOR_E* code or 0 (elector_event.reason)
    /// @{
    /// The election name; detail, key, value and their lengths as in
    /// elector_event (copied: they live as long as this object).
    std::string detail, name, key, value;
    /// @}
    /// @{
    /// Fencing token, lease and CLOCK_MONOTONIC time, as in elector_event.
    int64_t token = 0, lease = 0, mono_ns = 0;
    /// @}

    event() = default;
    /// Copies e.
    explicit event(const elector_event &e)
        : type(e.type), reason(e.reason), detail(e.detail ? e.detail : ""),
          name(e.name ? e.name : ""),
          key(e.key ? std::string(reinterpret_cast<const char *>(e.key), e.key_len) : ""),
          value(e.value
                    ? std::string(reinterpret_cast<const char *>(e.value), e.value_len)
                    : ""),
          token(e.token), lease(e.lease), mono_ns(e.mono_ns)
    {
    }
    /// elector_event_name(type): "elected", "lost", ...
    const char *type_name() const noexcept
    {
        return elector_event_name(type);
    }
};

/// A leader as read from etcd (elector_leader_info, owned).
struct leader_info {
    /// @{
    /// The leader's key and the value it proclaimed.
    std::string key, value;
    /// @}
    /// @{
    /// Its token (create revision), its lease, the store revision of the read.
    int64_t token = 0, lease = 0, revision = 0;
    /// @}
};

/// What receives events (observer, election::on_lost(), election::on_event()).
using event_fn = std::function<void(const event &)>;

// ---- client ---------------------------------------------------------------------

/// Client settings: the fields of elector_etcd_config that C++ users set, with
/// the same defaults.
struct client_options {
    client_options() = default;
    /// client::threaded({"10.0.0.1:2379,10.0.0.2:2379"}), the rest defaults.
    client_options(const char *eps) : endpoints(eps ? eps : "") {}
    /// The same with a string.
    client_options(std::string eps) : endpoints(std::move(eps)) {}

    /// Comma-separated endpoints, as elector_etcd_config.endpoints.
    std::string endpoints = "127.0.0.1:2379";
    /// @{
    /// PEM CA bundle, client certificate and key; etcd user and its password
    /// (elector_etcd_config's fields; empty: unset).
    std::string cacert, cert, key, user, password;
    /// @}
    /// A file holding the password (first line), read again before a login when
    /// it changed; password (if set) is the one to start with. Empty: unused.
    std::string password_file;
    /// @{
    /// Connect + TLS + first SETTINGS; default deadline of unary calls.
    std::chrono::milliseconds dial_timeout{5000}, request_timeout{5000};
    /// @}
    /// Every this long the endpoint list is replaced by the members' client
    /// URLs (learners left out). 0 (the default): off, the list stays as given.
    /// A client whose endpoints use TLS never takes a cleartext URL from it.
    std::chrono::milliseconds auto_sync_interval{0};
    /// TLS only: endpoints without a scheme use TLS, an http:// one is refused.
    bool require_tls = false;
    std::chrono::milliseconds stall{
        1000}; ///< threaded: a callback running longer is reported
};

namespace detail
{
struct client_state {
    elector_etcd *etcd = nullptr;
    bool threaded = false; ///< made with own_thread
    std::mutex mu;
    std::function<void(std::exception_ptr)> on_error;
    int in_callback = 0; ///< embedded: callbacks of ours under way (one thread)

    ~client_state()
    {
        if (etcd) elector_etcd_free(etcd);
    }
    /// Embedded: counts a callback of ours under way (the destructors ask).
    void enter() noexcept
    {
        if (!threaded) in_callback++;
    }
    /// Its end.
    void leave() noexcept
    {
        if (!threaded) in_callback--;
    }
    /// Called in a catch block of a trampoline: never throws.
    void callback_threw() noexcept
    {
        std::exception_ptr ep = std::current_exception();
        std::function<void(std::exception_ptr)> h;
        try {
            std::lock_guard<std::mutex> g(mu);
            h = on_error;
        } catch (...) {
        }
        try {
            if (h) {
                h(ep);
                return;
            }
            std::rethrow_exception(ep);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "elector: a callback threw: %s\n", e.what());
        } catch (...) {
            std::fprintf(stderr, "elector: a callback threw\n");
        }
    }
};

inline elector_etcd_config make_config(const client_options &o)
{
    elector_etcd_config c;
    elector_etcd_config_init(&c);
    auto opt = [](const std::string &s) { return s.empty() ? nullptr : s.c_str(); };
    c.endpoints = o.endpoints.c_str();
    c.cacert = opt(o.cacert);
    c.cert = opt(o.cert);
    c.key = opt(o.key);
    c.user = opt(o.user);
    c.password = opt(o.password);
    c.password_file = opt(o.password_file);
    c.auto_sync_interval_ms = o.auto_sync_interval.count();
    c.require_tls = o.require_tls;
    c.dial_timeout_ms = o.dial_timeout.count();
    c.request_timeout_ms = o.request_timeout.count();
    return c;
}
} // namespace detail

class observer;

/// An etcd client and its loop, shared by the sessions, elections and observers
/// made on it (copies share one client). Made by threaded() or embedded().
class client
{
  public:
    /// The loop on a thread of its own (own_thread); calls from any thread.
    static client threaded(const client_options &o = {})
    {
        std::error_code ec;
        client c = threaded(o, ec);
        if (ec) throw error(ec.value(), "elector_etcd_new");
        return c;
    }
    /// The same; errors go to ec (and the client is not valid()).
    static client threaded(const client_options &o, std::error_code &ec)
    {
        return make(o, true, ec);
    }
    /// The caller's loop: poll fd(), call process().
    static client embedded(const client_options &o = {})
    {
        std::error_code ec;
        client c = embedded(o, ec);
        if (ec) throw error(ec.value(), "elector_etcd_new");
        return c;
    }
    /// The same; errors go to ec (and the client is not valid()).
    static client embedded(const client_options &o, std::error_code &ec)
    {
        return make(o, false, ec);
    }

    /// Holds a client (false after an error given to ec).
    bool valid() const noexcept
    {
        return st_ != nullptr;
    }
    /// valid()
    explicit operator bool() const noexcept
    {
        return valid();
    }
    /// Made by threaded().
    bool is_threaded() const noexcept
    {
        return st_ && st_->threaded;
    }

    /// Embedded only (-1 / no-ops when threaded). elector_etcd_fd(): the file
    /// descriptor to poll for POLLIN.
    int fd() const noexcept
    {
        return embedded_c() ? elector_etcd_fd(st_->etcd) : -1;
    }
    /// Embedded only: elector_etcd_timeout(), ms until process() is due.
    int64_t timeout() noexcept
    {
        return embedded_c() ? elector_etcd_timeout(st_->etcd) : -1;
    }
    /// Embedded only: elector_etcd_process(), the I/O and timers that are due.
    void process() noexcept
    {
        if (embedded_c()) elector_etcd_process(st_->etcd);
    }
    /// Embedded only: elector_etcd_run_once(), waits at most max then processes.
    void run_once(std::chrono::milliseconds max) noexcept
    {
        if (embedded_c()) elector_etcd_run_once(st_->etcd, detail::ms(max));
    }
    /// The C client (either way: the one C API works on both).
    elector_etcd *native() const noexcept
    {
        return st_ ? st_->etcd : nullptr;
    }

    /// Who exceptions thrown by callbacks go to (default: stderr).
    void on_callback_error(std::function<void(std::exception_ptr)> fn)
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->on_error = std::move(fn);
    }

    /// The current leader of `name`, or nullopt if nobody leads. A key without a
    /// lease first under NAME/ (nobody can lead until it is deleted) is
    /// ELECTOR_EBLOCKED; the throwing form names the key.
    std::optional<leader_info>
    leader(std::string_view name, std::chrono::milliseconds timeout, std::error_code &ec)
    {
        return read_leader(name, timeout, ec, nullptr);
    }
    /// The same; errors throw elector::error.
    std::optional<leader_info>
    leader(std::string_view name,
           std::chrono::milliseconds timeout = std::chrono::seconds(5))
    {
        std::error_code ec;
        std::string blocker;
        auto r = read_leader(name, timeout, ec, &blocker);
        if (ec.value() == ELECTOR_EBLOCKED)
            throw error(ec.value(), "leader: a key without a lease, " + blocker +
                                        ", blocks election " + std::string(name) +
                                        " (etcdctl del " + blocker + ")");
        if (ec) throw error(ec.value(), "leader");
        return r;
    }

  private:
    static client make(const client_options &o, bool own_thread, std::error_code &ec)
    {
        auto st = std::make_shared<detail::client_state>();
        elector_etcd_config cfg = detail::make_config(o);
        cfg.own_thread = own_thread;
        cfg.stall_ms = o.stall.count();
        st->threaded = own_thread;
        st->etcd = elector_etcd_new(&cfg);
        if (!st->etcd) {
            detail::set(ec, ELECTOR_ENOMEM);
            return client(nullptr);
        }
        if (detail::set(ec, elector_etcd_err(st->etcd))) return client(std::move(st));
        return client(nullptr);
    }
    bool embedded_c() const noexcept
    {
        return st_ && !st_->threaded;
    }
    std::optional<leader_info> read_leader(std::string_view name,
                                           std::chrono::milliseconds timeout,
                                           std::error_code &ec, std::string *blocker)
    {
        if (!st_) {
            detail::set(ec, ELECTOR_EINVAL);
            return std::nullopt;
        }
        std::string n(name);
        elector_leader_info li;
        int rc = elector_leader_sync(st_->etcd, n.c_str(), detail::ms(timeout), &li);
        if (rc == ELECTOR_EBLOCKED) {
            if (blocker)
                blocker->assign(reinterpret_cast<const char *>(li.key), li.key_len);
            elector_leader_free(&li);
        }
        if (!detail::set(ec, rc) || rc == 1) return std::nullopt;
        leader_info out;
        out.key.assign(reinterpret_cast<const char *>(li.key), li.key_len);
        out.value.assign(reinterpret_cast<const char *>(li.value), li.value_len);
        out.token = li.token;
        out.lease = li.lease;
        out.revision = li.revision;
        elector_leader_free(&li);
        return out;
    }

  public:
    /// An observer of `name` on this client (see observer).
    observer observe(std::string_view name, event_fn fn);

    /// The shared state, for the other classes of this header.
    const std::shared_ptr<detail::client_state> &state() const noexcept
    {
        return st_;
    }

  private:
    explicit client(std::shared_ptr<detail::client_state> st) : st_(std::move(st)) {}
    std::shared_ptr<detail::client_state> st_;
};

// ---- observer -------------------------------------------------------------------

namespace detail
{
struct observer_state {
    std::shared_ptr<client_state> c;
    elector_observer *core = nullptr;
    event_fn fn;

    static void tramp(const elector_event *ev, void *ud) noexcept
    {
        auto *s = static_cast<observer_state *>(ud);
        try {
            s->fn(event(*ev));
        } catch (...) {
            s->c->callback_threw();
        }
    }
    static void cb(elector_observer *, const elector_event *ev, void *ud) noexcept
    {
        auto c = static_cast<observer_state *>(ud)->c;
        c->enter();
        tramp(ev, ud);
        c->leave();
    }
    ~observer_state()
    {
        if (core) elector_observer_free(core);
    }
};
} // namespace detail

/// Follows the leader of a name: fn gets LEADER / NO_LEADER events (and FAILED
/// once if the server breaks the protocol). Stops when destroyed.
class observer
{
  public:
    observer() = default;
    /// Starts following `name` on c (elector_observe(); on a threaded client fn
    /// runs on the callback thread). Throws elector::error (ELECTOR_EINVAL) without a
    /// client, or when the observer cannot be made.
    observer(client &c, std::string_view name, event_fn fn)
    {
        if (!c.valid()) throw error(ELECTOR_EINVAL, "observe: no client");
        auto st = std::make_unique<detail::observer_state>();
        st->c = c.state();
        st->fn = std::move(fn);
        std::string n(name);
        st->core =
            elector_observe(c.native(), n.c_str(), detail::observer_state::cb, st.get());
        if (!st->core) throw error(ELECTOR_EINVAL, "observe");
        st_ = std::move(st);
    }
    /// Follows a name (false when default-constructed or moved from).
    bool valid() const noexcept
    {
        return st_ != nullptr;
    }

  private:
    std::unique_ptr<detail::observer_state> st_;
};

inline observer client::observe(std::string_view name, event_fn fn)
{
    return observer(*this, name, std::move(fn));
}

// ---- session --------------------------------------------------------------------

/// Session settings (elector_session_config's, for C++).
struct session_options {
    std::chrono::seconds ttl{10};        ///< requested TTL; etcd may grant more
    std::chrono::milliseconds margin{0}; ///< safety margin; 0: max(ttl/10, 200 ms)
    std::chrono::milliseconds grant_timeout{10000}; ///< the constructor waits this long
    /// A release helper revokes the lease the moment this process dies (crash,
    /// SIGKILL, _exit): the next candidate leads in milliseconds, not after the
    /// TTL. Off by default, as in C and Python (the library starts no process
    /// unless asked); leave it off when the work outlives the process (child
    /// processes: use `elector run`).
    bool release_on_exit = false;
};

namespace detail
{
struct session_state {
    std::shared_ptr<client_state> c;
    elector_session *core = nullptr;
    std::mutex mu;
    event_fn on_lost;

    static void tramp(const elector_event *ev, void *ud) noexcept
    {
        auto *s = static_cast<session_state *>(ud);
        try {
            event_fn fn;
            {
                std::lock_guard<std::mutex> g(s->mu);
                fn = s->on_lost;
            }
            if (fn) fn(event(*ev));
        } catch (...) {
            s->c->callback_threw();
        }
    }
    static void cb(elector_session *, const elector_event *ev, void *ud) noexcept
    {
        auto c = static_cast<session_state *>(ud)->c;
        c->enter();
        tramp(ev, ud);
        c->leave();
    }
    ~session_state()
    {
        // Embedded, outside a callback: the revoke is waited for (the loop
        // may never run again), so our keys go at once. Threaded: the loop
        // thread sends it, and the client's end waits for its answer.
        if (core && !c->threaded && c->in_callback == 0)
            elector_session_close_sync(core, 1000);
        else if (core)
            elector_session_close(core);
    }
};
} // namespace detail

/// A lease kept alive for as long as the session lives; revoked when it goes.
class session
{
  public:
    /// Grants the lease and waits for it (o.grant_timeout). Throws
    /// elector::error: the grant's error (ELECTOR_ETIMEDOUT, ECONNECT, EAUTH,
    /// ...), ELECTOR_EINVAL without a client.
    session(client &c, const session_options &o = {})
    {
        std::error_code ec;
        init(c, o, ec);
        if (ec) throw error(ec.value(), "session");
    }
    /// The same; errors go to ec (and the session is not valid()).
    session(client &c, const session_options &o, std::error_code &ec)
    {
        init(c, o, ec);
    }

    /// Holds a granted lease (false after an error given to ec).
    bool valid() const noexcept
    {
        return st_ != nullptr;
    }
    /// The lease ID.
    int64_t lease() const noexcept
    {
        return elector_session_lease(st_->core);
    }
    /// now < the validity deadline (elector_session_alive()).
    bool alive() const noexcept
    {
        return elector_session_alive(st_->core);
    }
    /// SESSION_LOST: the lease is gone or unprovable.
    void on_lost(event_fn fn)
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->on_lost = std::move(fn);
    }
    /// The shared state, for the other classes of this header.
    const std::shared_ptr<detail::session_state> &state() const noexcept
    {
        return st_;
    }

  private:
    void init(client &c, const session_options &o, std::error_code &ec)
    {
        if (!c.valid()) {
            detail::set(ec, ELECTOR_EINVAL);
            return;
        }
        auto st = std::make_shared<detail::session_state>();
        st->c = c.state();
        elector_session_config cfg;
        elector_session_config_init(&cfg);
        cfg.ttl_s = o.ttl.count();
        cfg.margin_ms = o.margin.count();
        cfg.release_on_exit = o.release_on_exit;
        st->core =
            elector_session_new(c.native(), &cfg, detail::session_state::cb, st.get());
        int rc = st->core ? elector_session_wait(st->core, detail::ms(o.grant_timeout))
                          : ELECTOR_ENOMEM;
        if (detail::set(ec, rc)) st_ = std::move(st);
    }
    std::shared_ptr<detail::session_state> st_;
};

// ---- election -------------------------------------------------------------------

namespace detail
{
struct election_state {
    std::shared_ptr<session_state> s;
    elector_election *core = nullptr;
    std::mutex mu;
    event_fn on_event, on_lost;
    std::string name;

    /// A guarded write's error, thrown: one to a key under NAME/ says why.
    [[noreturn]] void throw_guarded(const std::error_code &ec, std::string_view key,
                                    const char *what) const
    {
        char why[600];
        if (ec.value() == ELECTOR_EINVAL &&
            elector_guarded_key_check(name.c_str(), key.data(), key.size(), why,
                                      sizeof(why)))
            throw error(ec.value(), std::string(what) + ": " + why);
        throw error(ec.value(), what);
    }

    client_state &client() noexcept
    {
        return *s->c;
    }

    static void tramp(const elector_event *ev, void *ud) noexcept
    {
        auto *e = static_cast<election_state *>(ud);
        try {
            event_fn any, lost;
            {
                std::lock_guard<std::mutex> g(e->mu);
                any = e->on_event;
                if (ev->type == ELECTOR_EV_LOST) lost = e->on_lost;
            }
            event copy(*ev);
            if (lost) lost(copy);
            if (any) any(copy);
        } catch (...) {
            e->client().callback_threw();
        }
    }
    static void cb(elector_election *, const elector_event *ev, void *ud) noexcept
    {
        auto c = static_cast<election_state *>(ud)->s->c;
        c->enter();
        tramp(ev, ud);
        c->leave();
    }
    ~election_state()
    {
        if (core) elector_election_free(core);
    }

    bool is_leader() const noexcept
    {
        return elector_is_leader(core);
    }
    int64_t token() const noexcept
    {
        return elector_election_token(core);
    }
    int campaign_sync(std::string_view v, int64_t ms) noexcept
    {
        return elector_campaign_sync(core, v.data(), v.size(), ms);
    }
    int resign_async() noexcept
    {
        return elector_resign(core);
    }
    int resign_sync(int64_t ms) noexcept
    {
        return elector_resign_sync(core, ms);
    }
    int put_sync(std::string_view k, std::string_view v, int64_t ms) noexcept
    {
        return elector_guarded_put_sync(core, k.data(), k.size(), v.data(), v.size(), ms);
    }
    int delete_sync(std::string_view k, int64_t ms) noexcept
    {
        return elector_guarded_delete_sync(core, k.data(), k.size(), ms);
    }
};

/// true: written; false: not the leader (nothing written); else ec/throw.
inline bool guarded_result(int rc, std::error_code &ec) noexcept
{
    if (rc == ELECTOR_ENOTLEADER) {
        ec.clear();
        return false;
    }
    return detail::set(ec, rc);
}
} // namespace detail

class election;

/// Proof of a won campaign. Movable, not copyable; resigns when destroyed (or
/// at resign()). Keeps its election alive.
class leadership
{
  public:
    leadership() = default;
    /// Takes o's campaign (o no longer holds one).
    leadership(leadership &&o) noexcept : st_(std::move(o.st_)) {}
    /// Resigns the campaign held (without waiting), then takes o's.
    leadership &operator=(leadership &&o) noexcept
    {
        if (this != &o) {
            release_quietly();
            st_ = std::move(o.st_);
        }
        return *this;
    }
    leadership(const leadership &) = delete;
    leadership &operator=(const leadership &) = delete;
    ~leadership()
    {
        release_quietly();
    }

    /// Holds a won campaign (true even after a loss; see is_leader()).
    bool valid() const noexcept
    {
        return st_ != nullptr;
    }
    /// valid()
    explicit operator bool() const noexcept
    {
        return valid();
    }
    /// We still lead now (the session's validity deadline has not passed).
    bool is_leader() const noexcept
    {
        return st_ && st_->is_leader();
    }
    /// The fencing token (our key's create revision; 0 without a campaign).
    int64_t token() const noexcept
    {
        return st_ ? st_->token() : 0;
    }

    /// A write made only while we still lead: true written, false not the
    /// leader any more (nothing written); other errors throw / go to ec.
    bool put_if_leader(std::string_view key, std::string_view value,
                       std::chrono::milliseconds timeout, std::error_code &ec) noexcept
    {
        if (!st_) return detail::guarded_result(ELECTOR_ENOTLEADER, ec);
        return detail::guarded_result(st_->put_sync(key, value, detail::ms(timeout)), ec);
    }
    /// The same; errors throw elector::error (a key under NAME/ says why).
    bool put_if_leader(std::string_view key, std::string_view value,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5))
    {
        std::error_code ec;
        bool ok = put_if_leader(key, value, timeout, ec);
        if (ec && st_) st_->throw_guarded(ec, key, "put_if_leader");
        if (ec) throw error(ec.value(), "put_if_leader");
        return ok;
    }
    /// A delete of key made only while we still lead
    /// (elector_guarded_delete_sync()): true deleted, false not the leader any
    /// more (nothing deleted); other errors go to ec.
    bool delete_if_leader(std::string_view key, std::chrono::milliseconds timeout,
                          std::error_code &ec) noexcept
    {
        if (!st_) return detail::guarded_result(ELECTOR_ENOTLEADER, ec);
        return detail::guarded_result(st_->delete_sync(key, detail::ms(timeout)), ec);
    }

    /// Resigns now and waits until our key is deleted (the destructor does not
    /// wait). Idempotent.
    void resign(std::chrono::milliseconds timeout, std::error_code &ec) noexcept
    {
        auto st = std::move(st_);
        int rc = st ? st->resign_sync(detail::ms(timeout)) : 0;
        detail::set(ec, rc == ELECTOR_EINVAL ? 0 : rc);
    }
    /// The same; errors throw elector::error.
    void resign(std::chrono::milliseconds timeout = std::chrono::seconds(5))
    {
        std::error_code ec;
        resign(timeout, ec);
        if (ec) throw error(ec.value(), "resign");
    }

  private:
    friend class election;
    explicit leadership(std::shared_ptr<detail::election_state> st) : st_(std::move(st))
    {
    }
    void release_quietly() noexcept
    {
        if (st_) st_->resign_async();
        st_.reset();
    }
    std::shared_ptr<detail::election_state> st_;
};

/// An election of `name` on a session. The C library's rule holds: one
/// campaign per name and session at a time (another gets ELECTOR_EBUSY).
class election
{
  public:
    /// An election handle for `name` on s (no campaign yet). Throws
    /// elector::error (ELECTOR_EINVAL) without a session or for an empty name.
    election(session &s, std::string_view name)
    {
        if (!s.valid()) throw error(ELECTOR_EINVAL, "election: no session");
        auto st = std::make_shared<detail::election_state>();
        st->s = s.state();
        st->name = std::string(name);
        std::string n(name);
        st->core = elector_election_new(st->s->core, n.c_str(),
                                        detail::election_state::cb, st.get());
        if (!st->core) throw error(ELECTOR_EINVAL, "election");
        st_ = std::move(st);
    }

    /// Campaigns and waits until elected. Throws (or sets ec and returns an
    /// empty leadership) on failure or timeout; after a timeout the campaign
    /// goes on, and a later campaign() waits for it.
    leadership campaign(std::string_view value, std::chrono::milliseconds timeout,
                        std::error_code &ec) noexcept
    {
        int rc = st_->campaign_sync(value, detail::ms(timeout));
        if (rc == ELECTOR_EBUSY && st_->is_leader()) rc = 0; // already ours
        if (!detail::set(ec, rc)) return leadership();
        return leadership(st_);
    }
    /// The same; errors throw elector::error.
    leadership campaign(std::string_view value,
                        std::chrono::milliseconds timeout = forever)
    {
        std::error_code ec;
        leadership l = campaign(value, timeout, ec);
        if (ec) throw error(ec.value(), "campaign");
        return l;
    }

    /// We lead now, within the session's validity deadline (elector_is_leader()).
    bool is_leader() const noexcept
    {
        return st_->is_leader();
    }
    /// The fencing token (our key's create revision; 0 if none).
    int64_t token() const noexcept
    {
        return st_->token();
    }

    /// Ends a campaign (a campaign() blocked in another thread returns with
    /// ELECTOR_ECANCELED) or resigns, without waiting. False if idle.
    bool resign() noexcept
    {
        return st_->resign_async() == 0;
    }

    /// fn runs on LOST (we led and no longer do), on the callback thread
    /// (threaded) or inside process() (embedded).
    void on_lost(event_fn fn)
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->on_lost = std::move(fn);
    }
    /// fn runs on every event of this election.
    void on_event(event_fn fn)
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->on_event = std::move(fn);
    }

    /// A write made only while we still lead (elector_guarded_put_sync()): true
    /// written, false not the leader (nothing written); other errors go to ec.
    bool put_if_leader(std::string_view key, std::string_view value,
                       std::chrono::milliseconds timeout, std::error_code &ec) noexcept
    {
        return detail::guarded_result(st_->put_sync(key, value, detail::ms(timeout)), ec);
    }
    /// The same; errors throw elector::error (a key under NAME/ says why).
    bool put_if_leader(std::string_view key, std::string_view value,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5))
    {
        std::error_code ec;
        bool ok = put_if_leader(key, value, timeout, ec);
        if (ec && st_) st_->throw_guarded(ec, key, "put_if_leader");
        if (ec) throw error(ec.value(), "put_if_leader");
        return ok;
    }

    /// The shared state, for the other classes of this header.
    const std::shared_ptr<detail::election_state> &state() const noexcept
    {
        return st_;
    }

  private:
    std::shared_ptr<detail::election_state> st_;
};

/// A mutex on etcd (the election protocol: the lowest create revision holds
/// it), usable with std::lock_guard / std::unique_lock. Each mutex object holds
/// its own session: two mutex objects of one name exclude each other, in one
/// process or in many.
class mutex
{
  public:
    /// A mutex named `name` on c, with a session of its own (o). Throws as
    /// session and election do.
    mutex(client &c, std::string_view name, const session_options &o = {})
        : s_(c, o), e_(s_, name)
    {
    }
    /// Waits up to timeout for the mutex; throws elector::error on failure or
    /// timeout (ELECTOR_ETIMEDOUT: the campaign goes on).
    void lock_for(std::chrono::milliseconds timeout)
    {
        l_ = e_.campaign("", timeout);
    }
    /// Waits for the mutex without limit; throws elector::error on failure.
    void lock()
    {
        l_ = e_.campaign("", forever);
    }
    /// Waits up to timeout: true held, false timed out (the campaign is
    /// withdrawn); other errors throw elector::error.
    bool try_lock_for(std::chrono::milliseconds timeout)
    {
        std::error_code ec;
        l_ = e_.campaign("", timeout, ec);
        if (ec.value() == ELECTOR_ETIMEDOUT) {
            e_.state()->resign_sync(detail::ms(std::chrono::seconds(5)));
            return false;
        }
        if (ec) throw error(ec.value(), "lock");
        return true;
    }
    /// Releases the mutex and waits until our key is deleted.
    void unlock()
    {
        l_.resign();
    }
    /// Held now, within the session's validity deadline.
    bool owns_lock() const noexcept
    {
        return l_.is_leader();
    }
    /// The fencing token of the hold (0 if not held).
    int64_t token() const noexcept
    {
        return l_.token();
    }

  private:
    session s_;
    election e_;
    leadership l_;
};

} // namespace elector

#endif
