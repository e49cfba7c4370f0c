/*
 * nfqdelay.c
 *		Holds every packet of a netfilter queue for a fixed time before it
 *		lets it go on: a delay on a real network path, for kernels built
 *		without netem.  bench/seeds/run.sh queues the packets between the
 *		client's network namespace and the servers' (both directions) with
 *		iptables' NFQUEUE target and runs this in the client's namespace.
 *
 *		usage: nfqdelay <queue number> <delay in microseconds>
 *
 * Packets leave in the order they came (the delay is the same for all), so
 * one verdict releases every packet that is due.  On SIGTERM or SIGINT it
 * prints how many packets it held and how late it let them go, and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define HELD_MAX (1 << 16)

/* Packets held: their ids and when they are due, in arrival order */
static uint32_t held_id[HELD_MAX];
static int64_t held_due[HELD_MAX];
static unsigned int head,
			tail;
static int64_t delay_ns;
static volatile sig_atomic_t stopping;

/* Statistics for the closing line */
static uint64_t packets;
static uint64_t overflow;
static int64_t late_sum_ns;
static int64_t late_max_ns;

/* Nanoseconds on the monotonic clock */
static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Remember a queued packet and when to let it go */
static int
on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	uint32_t	id = ntohl(ph->packet_id);

	if (tail - head == HELD_MAX)
	{
		/* full: let it go at once rather than lose it */
		overflow++;
		return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
	}
	held_id[tail % HELD_MAX] = id;
	held_due[tail % HELD_MAX] = now_ns() + delay_ns;
	tail++;
	packets++;
	return 0;
}

/* Let every packet that is due go, with one verdict */
static void
release_due(struct nfq_q_handle *qh)
{
	int64_t		now = now_ns();
	uint32_t	last = 0;
	int			any = 0;

	while (head != tail && held_due[head % HELD_MAX] <= now)
	{
		int64_t		late = now - held_due[head % HELD_MAX];

		late_sum_ns += late;
		if (late > late_max_ns)
			late_max_ns = late;
		last = held_id[head % HELD_MAX];
		any = 1;
		head++;
	}
	if (any)
		nfq_set_verdict_batch(qh, last, NF_ACCEPT);
}

/* Note the signal; the loop ends at its next turn */
static void
on_signal(int sig)
{
	stopping = 1;
}

/* Bind the queue and hold its packets until told to stop */
int
main(int argc, char **argv)
{
	struct nfq_handle *h;
	struct nfq_q_handle *qh;
	char		buf[4096] __attribute__((aligned));
	int			fd;

	if (argc != 3)
	{
		fprintf(stderr, "usage: nfqdelay <queue number> <delay in microseconds>\n");
		return 2;
	}
	delay_ns = atol(argv[2]) * 1000;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	/* wake-ups as close to the due time as the kernel can make them */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	h = nfq_open();
	if (h == NULL)
	{
		perror("nfq_open");
		return 1;
	}
	qh = nfq_create_queue(h, atoi(argv[1]), on_packet, NULL);
	if (qh == NULL)
	{
		perror("nfq_create_queue");
		return 1;
	}
	if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0)
	{
		perror("nfq_set_mode");
		return 1;
	}
	nfq_set_queue_maxlen(qh, HELD_MAX);
	/* a full kernel queue lets packets through rather than drop them */
	nfq_set_queue_flags(qh, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN);
	nfnl_rcvbufsiz(nfq_nfnlh(h), 8 << 20);
	fd = nfq_fd(h);
	printf("nfqdelay: holding the packets of queue %s for %s us\n", argv[1], argv[2]);
	fflush(stdout);

	while (!stopping)
	{
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		struct timespec ts,
				   *timeout = NULL;
		int			n;

		if (head != tail)
		{
			int64_t		wait = held_due[head % HELD_MAX] - now_ns();

			if (wait < 0)
				wait = 0;
			ts.tv_sec = wait / 1000000000;
			ts.tv_nsec = wait % 1000000000;
			timeout = &ts;
		}
		else
		{
			/* wake up now and then to notice a signal */
			ts.tv_sec = 0;
			ts.tv_nsec = 200000000;
			timeout = &ts;
		}
		n = ppoll(&pfd, 1, timeout, NULL);
		if (n < 0 && errno != EINTR)
		{
			perror("ppoll");
			break;
		}
		if (n > 0)
		{
			ssize_t		len;

			while ((len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
				nfq_handle_packet(h, buf, (int) len);
			if (len < 0 && errno == ENOBUFS)
				fprintf(stderr, "nfqdelay: the kernel dropped queue messages (ENOBUFS)\n");
		}
		release_due(qh);
	}
	/* let the rest go before leaving */
	if (head != tail)
		nfq_set_verdict_batch(qh, held_id[(tail - 1) % HELD_MAX], NF_ACCEPT);
	printf("nfqdelay: packets=%llu mean_late_us=%.1f max_late_us=%.1f overflow=%llu\n",
		   (unsigned long long) packets,
		   packets ? late_sum_ns / 1000.0 / packets : 0.0, late_max_ns / 1000.0,
		   (unsigned long long) overflow);
	nfq_destroy_queue(qh);
	nfq_close(h);
	return 0;
}
