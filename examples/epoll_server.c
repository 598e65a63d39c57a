/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* epoll_server.c -- an echo server whose idle timeouts are tickwheel timers
 * delivered to its own epoll thread (a delivery queue, tw_queue_*).
 *
 *   epoll_server [--idle-ms MS] [--max-conns N] [--verbose] [PORT]
 *
 * Listens on 127.0.0.1:PORT (0, the default, = a port chosen by the
 * system) and prints "port <n>" as its first line of output. Every byte a
 * client sends is echoed back. A connection that sends nothing for
 * --idle-ms (default 200) is closed by the server. It runs until SIGTERM
 * or SIGINT, or -- with --max-conns N > 0 -- until it has accepted N
 * connections and all of them are closed; then it prints one summary line
 *
 *   summary: accepted=.. echoed_bytes=.. idle_closed=.. peer_closed=..
 *            shutdown_closed=.. thread_violations=0 early=0 errors=0
 *            tw_fired=.. tw_stopped=.. queue_ran=.. ...
 *
 * (on one line) and exits 0, or 1 if any check below failed (2: bad usage).
 *
 * The design: ONE thread (main) owns everything -- the listening socket,
 * the client sockets, a signalfd, and the fd of a tickwheel delivery queue
 * (tw_queue_fd()), all in one epoll set. Each connection has an idle timer
 * started with tw_timer_spec.queue = that queue, so its callback and its
 * release hook run only inside tw_queue_run(), which this thread calls
 * when the queue's fd is readable. The connection state is therefore
 * touched by one thread only: there is no lock anywhere. The callbacks
 * check it (pthread_self() is the loop thread: thread_violations counts
 * the exceptions, and must stay 0) and check that no connection is closed
 * before it was idle for the full timeout (early must stay 0).
 *
 *  * Every read re-arms the timer (tw_timer_reset). A timer that is due
 *    but not yet run (the queue fd is readable) is re-armed too: data that
 *    arrived in time wins over the timeout, even when both are reported by
 *    the same epoll_wait().
 *  * A connection closed by its client stops its timer (tw_timer_stop);
 *    on this thread that is exact: TW_OK, even when the timer is already
 *    due, and its callback then never runs.
 *  * The timer's release hook owns the connection's memory: it runs once,
 *    after the idle callback, inside the stop call, or inside
 *    tw_queue_destroy() for connections still open at exit (which it
 *    closes) -- always on this thread.
 *  * Socket events of one epoll_wait() batch are handled before the queue
 *    is run, so no event of the batch refers to a connection freed by an
 *    idle callback.
 *  * SIGTERM/SIGINT are blocked in every thread -- before tw_runtime_create(),
 *    so the runtime's threads inherit the mask -- and read from the
 *    signalfd.
 *
 * Build by hand against an installed tickwheel:
 *   cc -std=c11 epoll_server.c $(pkg-config --cflags --libs tickwheel)
 * It is run as a test by examples/epoll_server_test.py (ctest
 * example_epoll_server).
 */
#define _GNU_SOURCE /* accept4, signalfd, epoll */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickwheel/tickwheel.h>

#define MS (UINT64_C(1000000))

/* ---- the server's state: owned by the loop thread ------------------------- */
struct conn {
    int fd;             /* -1 once closed */
    int started;        /* the idle timer was started (its hook owns us) */
    tw_timer timer;     /* the idle timer */
    uint64_t last_ns;   /* tw_now_ns() before the timer was last (re-)armed */
    size_t out_len;     /* bytes of out[] still to send back */
    size_t out_off;
    char out[4096];
};

static struct {
    tw_runtime *rt;
    tw_queue *q;
    int ep;
    int listener; /* -1 once closed (--max-conns reached, or at exit) */
    pthread_t loop_thread;
    uint64_t idle_ns;
    uint64_t max_conns; /* 0 = no limit */
    int verbose;
    /* counters */
    uint64_t accepted, live, echoed_bytes, idle_closed, peer_closed, shutdown_closed;
    uint64_t early, errors;
    atomic_uint_fast64_t thread_violations; /* the only thing another thread could touch (by a bug) */
} S;

/* epoll_event.data.ptr of the three fds that are not connections. */
static char TAG_LISTENER, TAG_SIGNAL, TAG_QUEUE;

static void error_at(const char *what, int rc) {
    fprintf(stderr, "epoll_server: %s: %s\n", what, rc < 0 ? tw_strerror(rc) : strerror(errno));
    ++S.errors;
}

static void check_thread(void) {
    if (!pthread_equal(pthread_self(), S.loop_thread)) atomic_fetch_add(&S.thread_violations, 1);
}

/* ---- the idle timer's callback and release hook (run by tw_queue_run) ----- */
static void on_idle(void *arg, tw_timer id) {
    struct conn *c = arg;
    (void)id;
    check_thread();
    if (tw_now_ns() < c->last_ns + S.idle_ns) ++S.early; /* never: the timer is never early */
    if (c->fd >= 0) {
        if (S.verbose) fprintf(stderr, "epoll_server: fd %d idle, closed\n", c->fd);
        close(c->fd); /* also removes it from the epoll set */
        c->fd = -1;
        ++S.idle_closed;
    }
    /* One-shot: the release hook (below) runs right after this returns. */
}

static void release_conn(void *arg) {
    struct conn *c = arg;
    check_thread();
    if (c->fd >= 0) { /* cancelled with the connection still open: tw_queue_destroy at exit */
        close(c->fd);
        if (c->started) ++S.shutdown_closed;
    }
    --S.live;
    free(c);
}

/* ---- connections ----------------------------------------------------------- */
static void arm(struct conn *c) {
    c->last_ns = tw_now_ns(); /* before the call: the deadline is at least last_ns + idle */
    const int rc = tw_timer_reset(S.rt, c->timer, S.idle_ns);
    if (rc != TW_OK) error_at("tw_timer_reset", rc);
}

/* Closed by the client (EOF) or a socket error: close, stop the timer. */
static void close_by_peer(struct conn *c) {
    close(c->fd);
    c->fd = -1;
    ++S.peer_closed;
    /* Exact on the queue's own thread: TW_OK even if the timer is due
     * (queued, fd readable) -- its callback will not run -- and the release
     * hook frees c inside this call. */
    const int rc = tw_timer_stop(S.rt, c->timer);
    if (rc != TW_OK) error_at("tw_timer_stop", rc);
}

static int watch(struct conn *c, uint32_t events, int op) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.ptr = c;
    return epoll_ctl(S.ep, op, c->fd, &ev);
}

/* Sends what is left of c->out. Returns 0, or -1 after closing c. */
static int flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        const ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0) {
            close_by_peer(c); /* EPIPE, ECONNRESET: the client is gone */
            return -1;
        }
        c->out_off += (size_t)n;
        S.echoed_bytes += (uint64_t)n;
    }
    if (c->out_off < c->out_len) {
        /* The client does not read: wait until it does, read nothing meanwhile. */
        if (watch(c, EPOLLOUT, EPOLL_CTL_MOD) != 0) error_at("epoll_ctl(MOD)", 0);
        return 0;
    }
    if (c->out_len != 0) {
        c->out_len = c->out_off = 0;
        if (watch(c, EPOLLIN, EPOLL_CTL_MOD) != 0) error_at("epoll_ctl(MOD)", 0);
    }
    return 0;
}

static void on_conn_event(struct conn *c, uint32_t events) {
    if (c->out_len != 0) { /* waiting for EPOLLOUT */
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) flush_out(c);
        return;
    }
    const ssize_t n = recv(c->fd, c->out, sizeof c->out, 0);
    if (n > 0) {
        arm(c); /* activity: the idle timeout starts again */
        c->out_len = (size_t)n;
        c->out_off = 0;
        flush_out(c);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        close_by_peer(c);
    }
}

static void on_accept(void) {
    for (;;) {
        if (S.max_conns != 0 && S.accepted >= S.max_conns) break;
        const int fd = accept4(S.listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
            error_at("accept4", 0);
            break;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(fd);
            error_at("calloc", 0);
            continue;
        }
        c->fd = fd;
        ++S.accepted;
        ++S.live;

        tw_timer_spec spec;
        tw_timer_spec_init(&spec);
        spec.delay_ns = S.idle_ns;
        spec.callback = on_idle;
        spec.release = release_conn;
        spec.arg = c;
        spec.queue = S.q; /* runs in tw_queue_run(S.q) on this thread, never on a worker */
        c->last_ns = tw_now_ns();
        const int rc = tw_timer_start_ex(S.rt, &spec, &c->timer);
        if (rc != TW_OK) {
            error_at("tw_timer_start_ex", rc);
            /* TW_EINVAL never calls the hook; any other failure called it (c is freed). */
            if (rc == TW_EINVAL) release_conn(c);
            continue;
        }
        c->started = 1;
        if (watch(c, EPOLLIN, EPOLL_CTL_ADD) != 0) {
            error_at("epoll_ctl(ADD)", 0);
            close_by_peer(c);
        }
    }
    if (S.max_conns != 0 && S.accepted >= S.max_conns && S.listener >= 0) {
        close(S.listener); /* enough: the loop ends when the last one is closed */
        S.listener = -1;
    }
}

static int add_fd(int fd, void *tag) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = tag;
    return epoll_ctl(S.ep, EPOLL_CTL_ADD, fd, &ev);
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    char *end = NULL;
    if (s == NULL || *s < '0' || *s > '9') return -1;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int usage(const char *why, const char *arg) {
    fprintf(stderr,
            "epoll_server: %s%s%s\n"
            "usage: epoll_server [--idle-ms MS (1..3600000, default 200)] [--max-conns N (0 = no limit)]\n"
            "                    [--verbose] [PORT (0..65535, default 0 = any)]\n",
            why, arg ? ": " : "", arg ? arg : "");
    return 2;
}

int main(int argc, char **argv) {
    uint64_t port = 0, idle_ms = 200;
    int have_port = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (strcmp(a, "--idle-ms") == 0) {
            if (++i >= argc || parse_u64(argv[i], 3600000, &idle_ms) != 0 || idle_ms == 0)
                return usage("--idle-ms wants a number of milliseconds, 1..3600000", i < argc ? argv[i] : NULL);
        } else if (strcmp(a, "--max-conns") == 0) {
            if (++i >= argc || parse_u64(argv[i], UINT32_MAX, &S.max_conns) != 0)
                return usage("--max-conns wants a count (0 = no limit)", i < argc ? argv[i] : NULL);
        } else if (strcmp(a, "--verbose") == 0) {
            S.verbose = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage("an echo server with tickwheel idle timeouts on its epoll thread", NULL);
            return 0;
        } else if (!have_port && parse_u64(a, 65535, &port) == 0) {
            have_port = 1;
        } else {
            return usage("unknown argument", a);
        }
    }
    S.idle_ns = idle_ms * MS;
    S.loop_thread = pthread_self();
    S.listener = -1;

    /* Signals first: every thread created from now on (the runtime's) inherits the mask. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0) {
        perror("epoll_server: pthread_sigmask");
        return 1;
    }
    const int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;  /* a few timers: one timing wheel is plenty */
    cfg.workers = 1; /* no callback runs on a worker here */
    int rc = tw_runtime_create(&cfg, &S.rt);
    if (rc != TW_OK) {
        fprintf(stderr, "epoll_server: tw_runtime_create: %s\n", tw_strerror(rc));
        return 1;
    }
    rc = tw_queue_create(S.rt, &S.q);
    if (rc != TW_OK) {
        fprintf(stderr, "epoll_server: tw_queue_create: %s\n", tw_strerror(rc));
        tw_runtime_destroy(S.rt);
        return 1;
    }

    S.ep = epoll_create1(EPOLL_CLOEXEC);
    S.listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    const int one = 1;
    if (sfd < 0 || S.ep < 0 || S.listener < 0 ||
        setsockopt(S.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(S.listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(S.listener, 128) != 0 ||
        getsockname(S.listener, (struct sockaddr *)&addr, &len) != 0 || add_fd(S.listener, &TAG_LISTENER) != 0 ||
        add_fd(sfd, &TAG_SIGNAL) != 0 || add_fd(tw_queue_fd(S.q), &TAG_QUEUE) != 0) {
        perror("epoll_server: setting up the sockets");
        tw_queue_destroy(S.q);
        tw_runtime_destroy(S.rt);
        return 1;
    }
    printf("port %u\n", (unsigned)ntohs(addr.sin_port));
    fflush(stdout);

    /* ---- the loop ----------------------------------------------------------- */
    const char *why = "signal";
    for (;;) {
        if (S.listener < 0 && S.live == 0) {
            why = "max-conns";
            break;
        }
        struct epoll_event evs[64];
        const int n = epoll_wait(S.ep, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            error_at("epoll_wait", 0);
            break;
        }
        int queue_ready = 0, stop = 0;
        for (int i = 0; i < n; ++i) {
            void *tag = evs[i].data.ptr;
            if (tag == &TAG_QUEUE) {
                queue_ready = 1; /* after the sockets of this batch (see the top) */
            } else if (tag == &TAG_LISTENER) {
                on_accept();
            } else if (tag == &TAG_SIGNAL) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                    if (S.verbose) fprintf(stderr, "epoll_server: signal %u\n", (unsigned)si.ssi_signo);
                    stop = 1;
                }
            } else {
                on_conn_event(tag, evs[i].events);
            }
        }
        if (queue_ready) {
            /* The due idle timers: their callbacks run here, on this thread. */
            rc = tw_queue_run(S.q, 64, 0);
            if (rc < 0) {
                error_at("tw_queue_run", rc);
                break;
            }
        }
        if (stop) break;
    }

    /* ---- the end: connections still open are closed by their release hooks,
     * which tw_queue_destroy() runs here, on this thread. ---------------------- */
    if (S.listener >= 0) close(S.listener);
    tw_queue_stats qs;
    memset(&qs, 0, sizeof qs);
    qs.size = sizeof qs;
    rc = tw_queue_get_stats(S.q, &qs);
    if (rc != TW_OK) error_at("tw_queue_get_stats", rc);
    rc = tw_queue_destroy(S.q);
    if (rc != TW_OK) error_at("tw_queue_destroy", rc);
    tw_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    rc = tw_runtime_stats(S.rt, &st);
    if (rc != TW_OK) error_at("tw_runtime_stats", rc);
    rc = tw_runtime_destroy(S.rt);
    if (rc != TW_OK) error_at("tw_runtime_destroy", rc);
    close(S.ep);
    close(sfd);
    if (S.live != 0) {
        fprintf(stderr, "epoll_server: %" PRIu64 " connection(s) never released\n", S.live);
        ++S.errors;
    }

    const uint64_t violations = atomic_load(&S.thread_violations);
    printf("summary: exit=%s accepted=%" PRIu64 " echoed_bytes=%" PRIu64 " idle_closed=%" PRIu64
           " peer_closed=%" PRIu64 " shutdown_closed=%" PRIu64 " thread_violations=%" PRIu64 " early=%" PRIu64
           " errors=%" PRIu64 " tw_fired=%" PRIu64 " tw_stopped=%" PRIu64 " tw_reset=%" PRIu64
           " queue_delivered=%" PRIu64 " queue_ran=%" PRIu64 " queue_run_p50_us=%" PRIu64
           " queue_run_max_us=%" PRIu64 "\n",
           why, S.accepted, S.echoed_bytes, S.idle_closed, S.peer_closed, S.shutdown_closed, violations, S.early,
           S.errors, st.fired, st.stopped, st.reset, qs.delivered, qs.ran, qs.run_p50_ns / 1000,
           qs.run_max_ns / 1000);
    fflush(stdout);
    return violations == 0 && S.early == 0 && S.errors == 0 ? 0 : 1;
}
