/*
 * proxy_floor: the reference reverse proxy of bench/compare (server `proxy-floor`,
 * workload `proxy`). It measures what the kernel alone costs per proxied HTTP/1.1
 * request on this machine, the counterpart of floor.c for the plain workloads: a
 * proxy's CPU per request can be read as "proxy floor + its own user-space work".
 *
 * What it does, and nothing more: one thread, one level-triggered epoll loop with
 * no timeout (no timers). Each accepted connection gets its own connection to the
 * origin, opened (non-blocking) at accept and kept alive as long as the client's;
 * with one origin connection per client connection, responses come back in the
 * order the requests went out, so nothing has to be matched up.
 * - Client to origin: per readiness, one recv() of up to 16 KiB; the request heads
 *   that read completes (the bytes "\r\n\r\n", the state carried across reads, no
 *   other parsing: requests must have no body) are forwarded with one send(), all
 *   of them at once when several arrived together (pipelining); the bytes of a head
 *   not yet complete are kept and forwarded with the read that completes it.
 * - Origin to client: per readiness, one recv() of up to 16 KiB and one send() of
 *   what it read, as it is. The response is not parsed (not even Content-Length):
 *   on a connection of its own, the origin's bytes are the client's.
 * A send the socket cannot take at once waits for EPOLLOUT, and the side it came
 * from is not read again until it is sent, so memory stays bounded. Either side
 * closing (or failing) closes both.
 *
 * What it does not do, and a real proxy must: parse or check request and response
 * heads, route, rewrite headers (the request goes out as it came, Host and all),
 * frame responses, share origin connections between clients or keep them beyond
 * their client, time anything out, log. So it is a floor, not a proxy: what any
 * proxy pays at least, two sockets' worth of system calls per request (a recv and a
 * send on each side, plus epoll_wait), and the same batching of pipelined requests
 * that a proxy with one origin connection per client could do. Opening the origin
 * connection at accept costs a socket(), connect() and close() per client
 * connection, where the peers take one from a keep-alive pool; the benchmark's
 * connections last the whole run (100 of them against tens of thousands of
 * requests), so that is noise beside the requests.
 *
 * C compiled by gcc at bench time, as floor.c and for the same reasons (see its
 * header): the fewest instructions between the system calls, in plain sight.
 *
 * Usage: proxy_floor PORT ORIGIN_PORT [ADDRESS [ORIGIN_ADDRESS]]
 *        (both addresses default to 127.0.0.1)
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

#define READ_SIZE 16384

struct conn;

/* One socket of a pair; epoll's data pointer for that socket. */
struct end {
    struct conn *c;
    int fd;
    unsigned watched; /* the epoll events asked for now */
};

/* Bytes a socket has not taken yet. */
struct pending {
    char *buf;  /* NULL when nothing is pending */
    size_t len; /* bytes in `buf` */
    size_t off; /* bytes of `buf` already sent */
};

struct conn {
    struct end client, origin;
    int matched;         /* bytes of "\r\n\r\n" seen at the end of the client's data */
    char *head;          /* the start of a request head not yet complete, or NULL */
    size_t head_len;     /* bytes in `head` */
    struct pending up;   /* request bytes for the origin */
    struct pending down; /* response bytes for the client */
    int closed;          /* closed; freed once the current batch of events is done */
    struct conn *next_dead;
};

static char in_buf[READ_SIZE];
static struct sockaddr_in origin_addr;
/* Connections closed during the current batch of events: the batch may still hold
 * an event of the other socket of the pair, which must find the conn not freed. */
static struct conn *dead;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void close_conn(int ep, struct conn *c) {
    if (c->closed)
        return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->client.fd, NULL);
    epoll_ctl(ep, EPOLL_CTL_DEL, c->origin.fd, NULL);
    close(c->client.fd);
    close(c->origin.fd);
    c->closed = 1;
    c->next_dead = dead;
    dead = c;
}

static void free_dead(void) {
    while (dead != NULL) {
        struct conn *c = dead;
        dead = c->next_dead;
        free(c->head);
        free(c->up.buf);
        free(c->down.buf);
        free(c);
    }
}

static void watch(int ep, struct end *e, unsigned events) {
    if (e->watched == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = e};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, e->fd, &ev) < 0)
        die("epoll_ctl MOD");
    e->watched = events;
}

/* A side is read only while nothing it sent is still pending on the other side,
 * and a socket is watched for writing only while something waits for it. */
static void rewatch(int ep, struct conn *c) {
    watch(ep, &c->client, (c->up.buf ? 0 : EPOLLIN) | (c->down.buf ? EPOLLOUT : 0));
    watch(ep, &c->origin, (c->down.buf ? 0 : EPOLLIN) | (c->up.buf ? EPOLLOUT : 0));
}

/* Sends what is pending; returns 0 when all is sent, 1 when the socket is full,
 * -1 when the connection failed. */
static int flush(int fd, struct pending *p) {
    while (p->off < p->len) {
        ssize_t w = send(fd, p->buf + p->off, p->len - p->off, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
        p->off += (size_t)w;
    }
    free(p->buf);
    p->buf = NULL;
    p->len = p->off = 0;
    return 0;
}

/* Sends buf[0..len) to fd; what the socket does not take is kept in `p`.
 * Returns -1 when the connection failed. */
static int relay(int fd, struct pending *p, const char *buf, size_t len) {
    ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    size_t sent = w < 0 ? 0 : (size_t)w;
    if (sent < len) {
        p->buf = malloc(len - sent);
        if (p->buf == NULL)
            die("malloc");
        memcpy(p->buf, buf + sent, len - sent);
        p->len = len - sent;
        p->off = 0;
    }
    return 0;
}

/* The end of the last request head ended in buf[from..n), or 0 if none; carries a
 * partial "\r\n\r\n" in c->matched. */
static size_t last_head_end(struct conn *c, const char *buf, size_t from, size_t n) {
    size_t end = 0;
    int m = c->matched;
    for (size_t i = from; i < n; i++) {
        char want = (m & 1) ? '\n' : '\r';
        if (buf[i] == want) {
            if (++m == 4) {
                end = i + 1;
                m = 0;
            }
        } else {
            m = buf[i] == '\r' ? 1 : 0;
        }
    }
    c->matched = m;
    return end;
}

static int is_transient(void) {
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

static void on_client_readable(int ep, struct conn *c) {
    /* An unfinished head goes first, so the read lands right after it. */
    size_t have = c->head_len;
    if (have > 0) {
        memcpy(in_buf, c->head, have);
        free(c->head);
        c->head = NULL;
        c->head_len = 0;
    }
    ssize_t n = recv(c->client.fd, in_buf + have, sizeof in_buf - have, 0);
    if (n == 0 || (n < 0 && !is_transient())) {
        close_conn(ep, c);
        return;
    }
    size_t total = have + (n < 0 ? 0 : (size_t)n);
    size_t end = n < 0 ? 0 : last_head_end(c, in_buf, have, total);
    if (end < total) {
        if (end == 0 && total == sizeof in_buf) {
            /* A head longer than the buffer: refused, as any proxy has a limit. */
            close_conn(ep, c);
            return;
        }
        c->head_len = total - end;
        c->head = malloc(c->head_len);
        if (c->head == NULL)
            die("malloc");
        memcpy(c->head, in_buf + end, c->head_len);
    }
    if (end > 0 && relay(c->origin.fd, &c->up, in_buf, end) < 0) {
        close_conn(ep, c);
        return;
    }
    rewatch(ep, c);
}

static void on_origin_readable(int ep, struct conn *c) {
    ssize_t n = recv(c->origin.fd, in_buf, sizeof in_buf, 0);
    if (n == 0 || (n < 0 && !is_transient())) {
        close_conn(ep, c);
        return;
    }
    if (n < 0)
        return;
    if (relay(c->client.fd, &c->down, in_buf, (size_t)n) < 0) {
        close_conn(ep, c);
        return;
    }
    rewatch(ep, c);
}

static void on_event(int ep, struct end *e, unsigned events) {
    struct conn *c = e->c;
    int is_client = e == &c->client;
    struct pending *out = is_client ? &c->down : &c->up;
    if ((events & EPOLLOUT) && out->buf != NULL) {
        if (flush(e->fd, out) < 0) {
            close_conn(ep, c);
            return;
        }
        rewatch(ep, c);
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (e->watched & EPOLLIN)) {
        if (is_client)
            on_client_readable(ep, c);
        else
            on_origin_readable(ep, c);
    } else if (events & (EPOLLHUP | EPOLLERR)) {
        /* Reported even when not asked for: a socket that is not being read (its
         * other side is full) has failed or hung up. */
        close_conn(ep, c);
    }
}

static int origin_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* A send before the connection is up fails with EAGAIN and waits for EPOLLOUT
     * like any full socket, so the connect needs no state of its own. */
    if (connect(fd, (struct sockaddr *)&origin_addr, sizeof origin_addr) < 0 &&
        errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void add(int ep, struct end *e) {
    e->watched = EPOLLIN;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = e};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, e->fd, &ev) < 0)
        die("epoll_ctl ADD");
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
        int ofd = origin_socket();
        if (ofd < 0) {
            perror("origin connect");
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL)
            die("calloc");
        c->client = (struct end){.c = c, .fd = fd};
        c->origin = (struct end){.c = c, .fd = ofd};
        add(ep, &c->client);
        add(ep, &c->origin);
    }
}

static void parse_addr(struct sockaddr_in *sa, const char *port, const char *address) {
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    if (inet_pton(AF_INET, address, &sa->sin_addr) != 1) {
        fprintf(stderr, "%s: not an IPv4 address\n", address);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: %s PORT ORIGIN_PORT [ADDRESS [ORIGIN_ADDRESS]]\n", argv[0]);
        return 2;
    }
    const char *address = argc >= 4 ? argv[3] : "127.0.0.1";
    const char *origin = argc == 5 ? argv[4] : "127.0.0.1";
    struct sockaddr_in addr;
    parse_addr(&addr, argv[1], address);
    parse_addr(&origin_addr, argv[2], origin);
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
    fprintf(stderr, "proxy_floor: listening on %s:%s, origin %s:%s\n", address, argv[1], origin,
            argv[2]);

    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct end *e = events[i].data.ptr;
            if (e == NULL)
                accept_all(ep, lfd);
            else if (!e->c->closed)
                on_event(ep, e, events[i].events);
        }
        free_dead();
    }
}
