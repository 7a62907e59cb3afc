/*
 * latency_proxy.c
 *   Loopback TCP relay for the benchmark harness: holds every chunk of data
 *   for a fixed one-way delay before passing it on, so that a chosen network
 *   round-trip time can be simulated between the coordinator and the shards.
 *
 * Usage:
 *   latency_proxy --delay-us N [--max-queue BYTES] [--verbose]
 *                 --listen HOST:PORT --target HOST:PORT
 *                 [--listen HOST:PORT --target HOST:PORT ...]
 *
 * Each accepted client gets its own connection to the target of the listener
 * it arrived on.  Data read from either side is queued with a due time of
 * "now + delay" and written to the other side once due, in order.  An end of
 * file is queued the same way (as an empty chunk) and becomes a half-close
 * (shutdown(SHUT_WR)) of the other side when it falls due.  Since the delay
 * is the same for everything, RTT = 2 x delay.
 *
 * One thread, epoll, non-blocking sockets.  Wake-ups for due chunks come
 * from a timerfd armed at an absolute CLOCK_MONOTONIC time, so the delay has
 * microsecond resolution (epoll_wait's own timeout only has milliseconds).
 * A side whose queue holds more than --max-queue bytes is not read until
 * the queue drains to half of that, which passes back-pressure on to the
 * sender through TCP.
 *
 * The TCP handshake itself is not delayed: a new connection costs one round
 * trip less than on a real network.  Run it until killed (SIGTERM/SIGINT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK		(64 * 1024)
#define MAX_EVENTS		128
#define MAX_LISTENERS	256

/* What an epoll registration points at. */
typedef enum
{
	OBJ_LISTENER,
	OBJ_ENDPOINT,
	OBJ_TIMER
} obj_kind;

/* One piece of data read from a socket, waiting for its due time. */
typedef struct chunk
{
	struct chunk *next;
	uint64_t	due_ns;			/* CLOCK_MONOTONIC time it may be written */
	size_t		len;			/* 0 marks an end of file */
	size_t		off;			/* bytes already written */
	char		data[];
} chunk;

/* The chunks travelling in one direction, oldest first. */
typedef struct queue
{
	chunk	   *head;
	chunk	   *tail;
	size_t		bytes;			/* unwritten payload bytes held */
} queue;

struct conn;

/* One socket of a relayed connection (side 0: client, side 1: target). */
typedef struct endpoint
{
	obj_kind	kind;			/* always OBJ_ENDPOINT, must come first */
	struct conn *conn;
	int			side;
	int			fd;
	uint32_t	events;			/* interest currently registered in epoll */
	bool		registered;		/* fd is in the epoll set */
	bool		read_eof;		/* end of file (or read stopped for good) */
	bool		write_shut;		/* we have half-closed this socket */
} endpoint;

/* A client connection and its connection to the target. */
typedef struct conn
{
	endpoint	ep[2];
	queue		q[2];			/* q[s]: data read from side s */
	bool		connecting;		/* target connect() still in progress */
	bool		dead;			/* closed, waiting to be freed */
	struct conn *prev;
	struct conn *next;
	struct conn *next_dead;
} conn;

/* A listening socket and where its clients go. */
typedef struct listener
{
	obj_kind	kind;			/* always OBJ_LISTENER, must come first */
	int			fd;
	struct sockaddr_storage target;
	socklen_t	target_len;
	char		name[128];
} listener;

static int	epfd = -1;
static int	timer_fd = -1;
static obj_kind timer_kind = OBJ_TIMER;
static uint64_t delay_ns = 0;
static size_t max_queue = 8 * 1024 * 1024;
static bool verbose = false;
static conn *conns = NULL;		/* all live connections */
static conn *graveyard = NULL;	/* closed, freed after the event batch */
static uint64_t armed_ns = 0;	/* timer expiry currently set, 0 = none */

/*
 * now_ns
 *   The monotonic clock in nanoseconds.
 */
static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/*
 * die
 *   Print a message (with errno text if set) and exit; only used at startup.
 */
static void
die(const char *what)
{
	if (errno)
		fprintf(stderr, "latency_proxy: %s: %s\n", what, strerror(errno));
	else
		fprintf(stderr, "latency_proxy: %s\n", what);
	exit(1);
}

/*
 * usage
 *   Print the command line summary and exit with the given status.
 */
static void
usage(int status)
{
	fprintf(status ? stderr : stdout,
			"usage: latency_proxy --delay-us N [--max-queue BYTES] [--verbose]\n"
			"                     --listen HOST:PORT --target HOST:PORT\n"
			"                     [--listen HOST:PORT --target HOST:PORT ...]\n"
			"Relays TCP connections, holding all data for N microseconds each way.\n");
	exit(status);
}

/*
 * parse_hostport
 *   Resolve "HOST:PORT" (numeric or name) into a socket address.
 */
static void
parse_hostport(const char *arg, struct sockaddr_storage *addr, socklen_t *len)
{
	char		host[256];
	const char *colon = strrchr(arg, ':');
	struct addrinfo hints;
	struct addrinfo *res;
	size_t		hlen;
	int			rc;

	if (colon == NULL || colon == arg || colon[1] == '\0')
	{
		fprintf(stderr, "latency_proxy: bad address \"%s\" (want HOST:PORT)\n", arg);
		exit(2);
	}
	hlen = (size_t) (colon - arg);
	if (hlen >= sizeof(host))
		usage(2);
	memcpy(host, arg, hlen);
	host[hlen] = '\0';

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc != 0)
	{
		fprintf(stderr, "latency_proxy: cannot resolve \"%s\": %s\n", arg, gai_strerror(rc));
		exit(2);
	}
	memcpy(addr, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
}

/*
 * set_interest
 *   Register the wanted epoll events for an endpoint, calling epoll_ctl
 *   only when they differ from what is registered already.
 */
static void
set_interest(endpoint *ep, uint32_t events)
{
	struct epoll_event ev;

	if (ep->fd < 0 || !ep->registered || ep->events == events)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = ep;
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, ep->fd, &ev) < 0 && verbose)
		perror("latency_proxy: epoll_ctl");
	ep->events = events;
}

/*
 * update_interest
 *   Work out what an endpoint must wait for: input unless its own queue is
 *   full or it has ended, output while data for it is stuck on EAGAIN or
 *   while its connect() is pending.
 */
static void
update_interest(endpoint *ep, bool want_out)
{
	conn	   *c = ep->conn;
	uint32_t	events = 0;
	queue	   *own = &c->q[ep->side];

	if (!ep->read_eof)
	{
		/* hysteresis: stop at max_queue, resume below half of it */
		if (own->bytes < max_queue / 2 ||
			(own->bytes < max_queue && (ep->events & EPOLLIN)))
			events |= EPOLLIN;
	}
	if (want_out || (ep->side == 1 && c->connecting))
		events |= EPOLLOUT;
	set_interest(ep, events);
}

/*
 * queue_push
 *   Append a chunk (copy of buf, or an end-of-file marker when len is 0).
 */
static bool
queue_push(queue *q, const char *buf, size_t len, uint64_t due)
{
	chunk	   *ch = malloc(sizeof(chunk) + len);

	if (ch == NULL)
		return false;
	ch->next = NULL;
	ch->due_ns = due;
	ch->len = len;
	ch->off = 0;
	if (len > 0)
		memcpy(ch->data, buf, len);
	if (q->tail)
		q->tail->next = ch;
	else
		q->head = ch;
	q->tail = ch;
	q->bytes += len;
	return true;
}

/*
 * queue_pop
 *   Drop the head chunk of a queue.
 */
static void
queue_pop(queue *q)
{
	chunk	   *ch = q->head;

	q->head = ch->next;
	if (q->head == NULL)
		q->tail = NULL;
	q->bytes -= ch->len - ch->off;
	free(ch);
}

/*
 * conn_close
 *   Close both sockets of a connection at once (error or normal end) and
 *   move it to the graveyard; events still pending for it are ignored.
 */
static void
conn_close(conn *c, const char *why)
{
	int			s;

	if (c->dead)
		return;
	if (verbose)
		fprintf(stderr, "latency_proxy: closing connection (%s)\n", why);
	for (s = 0; s < 2; s++)
	{
		if (c->ep[s].fd >= 0)
		{
			if (c->ep[s].registered)
				epoll_ctl(epfd, EPOLL_CTL_DEL, c->ep[s].fd, NULL);
			c->ep[s].registered = false;
			close(c->ep[s].fd);
			c->ep[s].fd = -1;
		}
		while (c->q[s].head)
			queue_pop(&c->q[s]);
	}
	c->dead = true;
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next_dead = graveyard;
	graveyard = c;
}

/*
 * retire_endpoint
 *   Take a socket out of epoll once nothing more can be read from it nor
 *   written to it; a level-triggered EPOLLHUP would otherwise spin.
 */
static void
retire_endpoint(endpoint *ep)
{
	if (ep->registered && ep->read_eof && ep->write_shut)
	{
		epoll_ctl(epfd, EPOLL_CTL_DEL, ep->fd, NULL);
		ep->registered = false;
	}
}

/*
 * side_broken
 *   A socket failed (reset, error, hang-up): treat it as an end of file
 *   in its direction and drop what was still on its way to it, so that the
 *   other direction can still deliver its data and its end of file.
 */
static void
side_broken(conn *c, int side, const char *why)
{
	endpoint   *ep = &c->ep[side];

	if (verbose)
		fprintf(stderr, "latency_proxy: side %d: %s\n", side, why);
	if (!ep->read_eof)
	{
		ep->read_eof = true;
		if (!queue_push(&c->q[side], NULL, 0, now_ns() + delay_ns))
		{
			conn_close(c, "out of memory");
			return;
		}
	}
	while (c->q[1 - side].head)
		queue_pop(&c->q[1 - side]);
	ep->write_shut = true;
	retire_endpoint(ep);
}

/*
 * conn_maybe_finish
 *   Close a connection once both directions have delivered their end of
 *   file: nothing more can travel over it.
 */
static void
conn_maybe_finish(conn *c)
{
	if (!c->dead && c->ep[0].write_shut && c->ep[1].write_shut)
		conn_close(c, "both sides finished");
}

/*
 * flush_to
 *   Write every due chunk read from side `from` to the other side; stop at
 *   the first chunk not yet due or on EAGAIN.  Returns false if the
 *   connection was closed.
 */
static bool
flush_to(conn *c, int from, uint64_t now)
{
	queue	   *q = &c->q[from];
	endpoint   *dst = &c->ep[1 - from];
	bool		blocked = false;

	if (c->connecting)
		return true;			/* target not ready; keep everything queued */

	while (q->head && q->head->due_ns <= now)
	{
		chunk	   *ch = q->head;

		if (ch->len == 0)
		{
			/* end of file from `from`: pass it on as a half-close */
			if (!dst->write_shut)
			{
				shutdown(dst->fd, SHUT_WR);
				dst->write_shut = true;
				retire_endpoint(dst);
			}
			queue_pop(q);
			continue;
		}

		{
			ssize_t		n = send(dst->fd, ch->data + ch->off, ch->len - ch->off,
								 MSG_NOSIGNAL);

			if (n < 0)
			{
				if (errno == EAGAIN || errno == EWOULDBLOCK)
				{
					blocked = true;
					break;
				}
				if (errno == EINTR)
					continue;
				side_broken(c, 1 - from, strerror(errno));
				break;
			}
			ch->off += (size_t) n;
			q->bytes -= (size_t) n;
			if (ch->off == ch->len)
				queue_pop(q);
		}
	}

	if (c->dead)
		return false;
	update_interest(dst, blocked);
	/* the queue shrank: the reading side may take input again */
	update_interest(&c->ep[from], (c->ep[from].events & EPOLLOUT) != 0 &&
					c->q[1 - from].head != NULL);
	conn_maybe_finish(c);
	return !c->dead;
}

/*
 * read_from
 *   Read what a socket has (until EAGAIN or the queue limit) and queue it
 *   for the other side with due time now + delay.
 */
static void
read_from(conn *c, int side)
{
	static char buf[READ_CHUNK];
	endpoint   *ep = &c->ep[side];
	queue	   *q = &c->q[side];

	while (!ep->read_eof && q->bytes < max_queue)
	{
		ssize_t		n = recv(ep->fd, buf, sizeof(buf), 0);

		if (n > 0)
		{
			if (!queue_push(q, buf, (size_t) n, now_ns() + delay_ns))
			{
				conn_close(c, "out of memory");
				return;
			}
			continue;
		}
		if (n == 0)
		{
			ep->read_eof = true;
			if (!queue_push(q, NULL, 0, now_ns() + delay_ns))
			{
				conn_close(c, "out of memory");
				return;
			}
			retire_endpoint(ep);
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		side_broken(c, side, strerror(errno));
		return;
	}
	update_interest(ep, (ep->events & EPOLLOUT) != 0);
}

/*
 * register_fd
 *   Add a socket to epoll with the given interest.
 */
static bool
register_fd(int fd, uint32_t events, void *ptr)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = ptr;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

/*
 * accept_clients
 *   Accept every pending client of a listener and start the non-blocking
 *   connect() to its target.
 */
static void
accept_clients(listener *l)
{
	for (;;)
	{
		int			cfd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int			tfd;
		int			one = 1;
		conn	   *c;

		if (cfd < 0)
		{
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK && verbose)
				perror("latency_proxy: accept");
			return;
		}

		tfd = socket(l->target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (tfd < 0)
		{
			perror("latency_proxy: socket");
			close(cfd);
			continue;
		}
		/* chunks must leave when due, not when Nagle lets them */
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(tfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

		c = calloc(1, sizeof(conn));
		if (c == NULL)
		{
			close(cfd);
			close(tfd);
			continue;
		}
		c->ep[0] = (endpoint) {OBJ_ENDPOINT, c, 0, cfd, EPOLLIN, false, false, false};
		c->ep[1] = (endpoint) {OBJ_ENDPOINT, c, 1, tfd, EPOLLOUT, false, false, false};
		c->connecting = true;
		c->next = conns;
		if (conns)
			conns->prev = c;
		conns = c;

		if (connect(tfd, (struct sockaddr *) &l->target, l->target_len) < 0 &&
			errno != EINPROGRESS)
		{
			if (verbose)
				fprintf(stderr, "latency_proxy: connect for %s: %s\n", l->name, strerror(errno));
			c->ep[1].fd = -1;
			close(tfd);
			close(cfd);
			c->ep[0].fd = -1;
			conn_close(c, "connect failed");
			continue;
		}
		c->ep[0].registered = register_fd(cfd, EPOLLIN, &c->ep[0]);
		c->ep[1].registered = register_fd(tfd, EPOLLOUT, &c->ep[1]);
		if (!c->ep[0].registered || !c->ep[1].registered)
			conn_close(c, "epoll_ctl failed");
	}
}

/*
 * finish_connect
 *   The target socket became writable while connecting: check the result,
 *   and from now on also read from the target.
 */
static void
finish_connect(conn *c)
{
	int			err = 0;
	socklen_t	len = sizeof(err);

	if (getsockopt(c->ep[1].fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err != 0)
	{
		conn_close(c, strerror(err));
		return;
	}
	c->connecting = false;
	update_interest(&c->ep[1], false);
}

/*
 * handle_endpoint
 *   Dispatch one epoll event of a relayed socket.
 */
static void
handle_endpoint(endpoint *ep, uint32_t events)
{
	conn	   *c = ep->conn;

	if (c->dead)
		return;
	if (ep->side == 1 && c->connecting)
	{
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			finish_connect(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
	{
		if (!ep->read_eof)
			read_from(c, ep->side);
		/* hung up after its end of file was read: it cannot take data */
		if (!c->dead && ep->read_eof && (events & (EPOLLHUP | EPOLLERR)))
			side_broken(c, ep->side, "hang-up");
	}
	/* EPOLLOUT is served by the flush pass that follows every batch */
}

/*
 * flush_all
 *   Write every due chunk of every connection and return the earliest due
 *   time still waiting (0 if none); chunks stuck on EAGAIN wait for EPOLLOUT
 *   and do not count.
 */
static uint64_t
flush_all(void)
{
	uint64_t	now = now_ns();
	uint64_t	earliest = 0;
	conn	   *c = conns;

	while (c)
	{
		conn	   *next = c->next;
		int			s;

		for (s = 0; s < 2 && !c->dead; s++)
		{
			if (!flush_to(c, s, now))
				break;
			if (c->q[s].head && !c->connecting &&
				!(c->ep[1 - s].events & EPOLLOUT))
			{
				uint64_t	due = c->q[s].head->due_ns;

				if (earliest == 0 || due < earliest)
					earliest = due;
			}
		}
		c = next;
	}
	return earliest;
}

/*
 * arm_timer
 *   Make the timerfd fire at the given absolute monotonic time (0 disarms).
 */
static void
arm_timer(uint64_t when)
{
	struct itimerspec its;

	if (when == armed_ns)
		return;
	memset(&its, 0, sizeof(its));
	if (when != 0)
	{
		its.it_value.tv_sec = (time_t) (when / 1000000000u);
		its.it_value.tv_nsec = (long) (when % 1000000000u);
	}
	if (timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		perror("latency_proxy: timerfd_settime");
	armed_ns = when;
}

/*
 * free_graveyard
 *   Free the connections closed during the last event batch; once the last
 *   connection is gone, hand the queue memory of a burst back to the system.
 */
static void
free_graveyard(void)
{
	bool		freed = graveyard != NULL;

	while (graveyard)
	{
		conn	   *c = graveyard;

		graveyard = c->next_dead;
		free(c);
	}
	if (freed && conns == NULL)
		malloc_trim(0);
}

/*
 * open_listener
 *   Bind and listen on an address for one listen/target pair.
 */
static void
open_listener(listener *l, const char *listen_arg, const char *target_arg)
{
	struct sockaddr_storage addr;
	socklen_t	len;
	int			one = 1;

	parse_hostport(listen_arg, &addr, &len);
	parse_hostport(target_arg, &l->target, &l->target_len);
	snprintf(l->name, sizeof(l->name), "%s->%s", listen_arg, target_arg);
	l->kind = OBJ_LISTENER;
	l->fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		die("socket");
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l->fd, (struct sockaddr *) &addr, len) < 0)
		die(listen_arg);
	if (listen(l->fd, 512) < 0)
		die("listen");
	if (!register_fd(l->fd, EPOLLIN, l))
		die("epoll_ctl");
}

/*
 * main
 *   Parse the arguments, open the listeners, then run the event loop.
 */
int
main(int argc, char **argv)
{
	static listener listeners[MAX_LISTENERS];
	int			nlisteners = 0;
	const char *pending_listen = NULL;
	bool		have_delay = false;
	struct epoll_event events[MAX_EVENTS];
	int			i;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1");

	for (i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			usage(0);
		else if (strcmp(a, "--verbose") == 0)
			verbose = true;
		else if (v == NULL)
			usage(2);
		else if (strcmp(a, "--delay-us") == 0)
		{
			char	   *end;
			unsigned long long us = strtoull(v, &end, 10);

			if (*end != '\0')
				usage(2);
			delay_ns = (uint64_t) us * 1000u;
			have_delay = true;
			i++;
		}
		else if (strcmp(a, "--max-queue") == 0)
		{
			char	   *end;

			max_queue = (size_t) strtoull(v, &end, 10);
			if (*end != '\0' || max_queue < READ_CHUNK)
				usage(2);
			i++;
		}
		else if (strcmp(a, "--listen") == 0)
		{
			if (pending_listen)
				usage(2);
			pending_listen = v;
			i++;
		}
		else if (strcmp(a, "--target") == 0)
		{
			if (!pending_listen || nlisteners >= MAX_LISTENERS)
				usage(2);
			open_listener(&listeners[nlisteners++], pending_listen, v);
			pending_listen = NULL;
			i++;
		}
		else
			usage(2);
	}
	if (!have_delay || nlisteners == 0 || pending_listen)
		usage(2);

	/* the default 50 us timer slack would blur sub-millisecond delays */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	/* a background job may inherit these ignored; the harness stops us with them */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);

	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (timer_fd < 0)
		die("timerfd_create");
	if (!register_fd(timer_fd, EPOLLIN, &timer_kind))
		die("epoll_ctl");

	if (verbose)
		fprintf(stderr, "latency_proxy: %d listener(s), one-way delay %llu us\n",
				nlisteners, (unsigned long long) (delay_ns / 1000u));

	for (;;)
	{
		int			n = epoll_wait(epfd, events, MAX_EVENTS, -1);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (i = 0; i < n; i++)
		{
			obj_kind   *kind = events[i].data.ptr;

			if (*kind == OBJ_LISTENER)
				accept_clients((listener *) kind);
			else if (*kind == OBJ_TIMER)
			{
				uint64_t	expirations;

				/* nothing to do but drain it; the flush pass below acts */
				if (read(timer_fd, &expirations, sizeof(expirations)) < 0 &&
					errno != EAGAIN)
					perror("latency_proxy: timerfd read");
				armed_ns = 0;
			}
			else
				handle_endpoint((endpoint *) kind, events[i].events);
		}
		arm_timer(flush_all());
		free_graveyard();
	}
	return 0;
}
