/*
 * floor: the reference server of bench/compare. It measures what the kernel
 * alone costs per HTTP/1.1 request on this machine, so a server's CPU per request
 * can be read as "floor + its own user-space work".
 *
 * What it does, and nothing more: one thread, one level-triggered epoll loop with
 * no timeout (no timers); per readiness of a connection, one recv() of up to 16 KiB;
 * it counts the request heads that read completes (the bytes "\r\n\r\n", the state
 * carried across reads, no other parsing: requests must have no body), and answers
 * them all with one send() of that many copies of a canned 13-byte response.
 * Keep-alive and pipelining (16 requests per write from the load generator) follow:
 * 16 heads in one read are 16 responses in one send. The client closing ends the
 * connection. A response the socket cannot take at once waits for EPOLLOUT, and the
 * connection is not read again until it is sent, so memory stays bounded.
 *
 * Why C compiled by gcc when the benchmark runs, rather than Rust: the point is the
 * fewest instructions between the system calls, written in plain sight. epoll in Rust
 * takes either a crate from the registry (a second Cargo project and lock file to
 * build and keep) or unsafe FFI; Pier's own code forbids unsafe and this program is a
 * measuring tool, not part of Pier. gcc is present wherever Pier builds on Debian (it
 * is the linker cargo uses), compiles this file in a fraction of a second, and the
 * harness builds it with `gcc -O2` into its temp directory on every run.
 *
 * Usage: floor PORT [ADDRESS]   (ADDRESS defaults to 127.0.0.1)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The same body every server of the benchmark answers, with the header lines a
 * usual server sends (a fixed date: the floor keeps no clock). */
static const char RESPONSE[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: floor\r\n"
    "Date: Mon, 23 Nov 2026 00:00:00 GMT\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 13\r\n"
    "\r\n"
    "Hello, World!";
#define RESPONSE_LEN (sizeof(RESPONSE) - 1)
#define READ_SIZE 16384
/* A read of READ_SIZE bytes holds at most READ_SIZE / 4 heads ("\r\n\r\n"). */
#define MAX_OUT ((READ_SIZE / 4 + 1) * RESPONSE_LEN)

struct conn {
    int fd;
    int matched;        /* bytes of "\r\n\r\n" seen at the end of the last read */
    char *pending;      /* responses not yet taken by the socket, or NULL */
    size_t pending_len; /* bytes in `pending` */
    size_t pending_off; /* bytes of `pending` already sent */
};

static char in_buf[READ_SIZE];
/* Filled with copies of RESPONSE at start: N answers are its first N * RESPONSE_LEN
 * bytes, so a read costs no copying. */
static char out_buf[MAX_OUT];

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void close_conn(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->pending);
    free(c);
}

static void watch(int ep, struct conn *c, unsigned events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl MOD");
}

/* Counts the request heads ended in buf[0..n), carrying a partial "\r\n\r\n". */
static size_t count_heads(struct conn *c, const char *buf, size_t n) {
    size_t heads = 0;
    int m = c->matched;
    for (size_t i = 0; i < n; i++) {
        char want = (m & 1) ? '\n' : '\r';
        if (buf[i] == want) {
            if (++m == 4) {
                heads++;
                m = 0;
            }
        } else {
            m = buf[i] == '\r' ? 1 : 0;
        }
    }
    c->matched = m;
    return heads;
}

/* Sends what is pending; returns 0 when all is sent, 1 when the socket is full,
 * -1 when the connection failed. */
static int flush_pending(struct conn *c) {
    while (c->pending_off < c->pending_len) {
        ssize_t w = send(c->fd, c->pending + c->pending_off, c->pending_len - c->pending_off,
                         MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
        c->pending_off += (size_t)w;
    }
    free(c->pending);
    c->pending = NULL;
    c->pending_len = c->pending_off = 0;
    return 0;
}

static void on_readable(int ep, struct conn *c) {
    ssize_t n = recv(c->fd, in_buf, sizeof in_buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        close_conn(ep, c);
        return;
    }
    if (n < 0)
        return;
    size_t heads = count_heads(c, in_buf, (size_t)n);
    if (heads == 0)
        return;
    size_t len = heads * RESPONSE_LEN;
    ssize_t w = send(c->fd, out_buf, len, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        close_conn(ep, c);
        return;
    }
    size_t sent = w < 0 ? 0 : (size_t)w;
    if (sent < len) {
        c->pending = malloc(len - sent);
        if (c->pending == NULL)
            die("malloc");
        memcpy(c->pending, out_buf + sent, len - sent);
        c->pending_len = len - sent;
        c->pending_off = 0;
        watch(ep, c, EPOLLOUT);
    }
}

static void on_writable(int ep, struct conn *c) {
    int r = flush_pending(c);
    if (r < 0)
        close_conn(ep, c);
    else if (r == 0)
        watch(ep, c, EPOLLIN);
}

static void accept_all(int ep, int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
                errno == ECONNABORTED)
                return;
            if (errno == EMFILE || errno == ENFILE) {
                perror("accept4");
                return;
            }
            die("accept4");
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL)
            die("calloc");
        c->fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl ADD");
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s PORT [ADDRESS]\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i + RESPONSE_LEN <= sizeof out_buf; i += RESPONSE_LEN)
        memcpy(out_buf + i, RESPONSE, RESPONSE_LEN);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    if (inet_pton(AF_INET, argc == 3 ? argv[2] : "127.0.0.1", &addr.sin_addr) != 1) {
        fprintf(stderr, "%s: not an IPv4 address\n", argv[2]);
        return 2;
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0)
        die("bind");
    if (listen(lfd, 4096) < 0)
        die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    /* The listener is told apart from connections by a NULL pointer. */
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0)
        die("epoll_ctl ADD listener");
    fprintf(stderr, "floor: listening on %s:%s\n", argc == 3 ? argv[2] : "127.0.0.1", argv[1]);

    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                accept_all(ep, lfd);
            } else if (c->pending != NULL) {
                on_writable(ep, c);
            } else {
                on_readable(ep, c);
            }
        }
    }
}
