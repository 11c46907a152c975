/*
 * wire.h: Cicada's transport, shared by the interposer and the gpu-server.
 *
 * A connection is a byte stream (a unix or TCP socket, or for local clients
 * a pair of shared-memory pipes beside the socket) carrying ONC RPC records.
 * Message types come from cicada.x (compiled by rpcgen into cicada.h).
 */
#ifndef CICADA_WIRE_H
#define CICADA_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <rpc/rpc.h>
#include "cicada.h"

/* Errors: a function that fails writes one line into the caller's buffer
 * of WIRE_ERRLEN bytes (char err[WIRE_ERRLEN]) with wire_fail, and returns
 * -1 (or NULL, or a CUresult). The snapshot library's SNAP_ERRLEN is the
 * same size, so one buffer serves both. */
#define WIRE_ERRLEN 512
#define WIRE_MAX_RECORD (CICADA_IMAGE_MAX + 65536u)

/* ---- addresses: "unix:/path" or "tcp:host:port" ---- */
enum wire_kind { WIRE_UNIX, WIRE_TCP };

struct wire_addr {
	enum wire_kind kind;
	int tls;                             /* tls:host:port */
	char path[108];
	char host[256];
	char port[16];
};

int wire_parse_addr(const char *text, struct wire_addr *addr, char *err);
/* A size above 0: bytes, or a number with K, M, G or T (either case). */
int wire_parse_size(const char *text, uint64_t *out);
/* tls.c: TLS connections end in a relay; these return its inner end */
#define WIRE_TLS_NAME_MAX 64                 /* a client's name (its certificate's CN), with its NUL */
int wire_tls_server_init(const char *cert, const char *key, const char *client_ca, char *err);
int wire_tls_server_ready(void);
int wire_tls_client(int fd, const char *host, char *err);
int wire_tls_server(int fd, int ms, char name[WIRE_TLS_NAME_MAX], char *err);
int wire_tls_name_ok(const char *name);
void wire_format_addr(const struct wire_addr *addr, char *out, size_t len);
int wire_listen(const struct wire_addr *addr, char *err);
int wire_dial(const struct wire_addr *addr, char *err);
int wire_send_fd(int sock, int fd);
int wire_recv_fd(int sock);
int wire_recv_fd_within(int sock, int timeout_ms);   /* -1 past the deadline too */
int wire_set_timeouts(int fd, int timeout_ms);      /* SO_RCVTIMEO and SO_SNDTIMEO */
/* The same with a one-byte tag that says what the descriptor is for. */
int wire_send_fd_tagged(int sock, int fd, char tag);
int wire_recv_fd_tagged(int sock, char *tag);
int wire_read_line(int fd, char *buf, size_t len);
int wire_send_all(int fd, const void *buf, size_t len);
int wire_recv_all(int fd, void *buf, size_t len);

/* ---- the token, proven without sending it (auth.c) ---- */
#define WIRE_NONCE_LEN 32
#define WIRE_PROOF_LEN 32
int wire_send_challenge(int fd, uint8_t nonce[WIRE_NONCE_LEN]);
int wire_recv_challenge(int fd, uint8_t nonce[WIRE_NONCE_LEN], int timeout_ms, char *err);
/* The proof of token for a challenge into out; its length, 0 if no token. */
size_t wire_token_proof(const char *token, size_t len, const uint8_t nonce[WIRE_NONCE_LEN],
			uint8_t out[WIRE_PROOF_LEN]);
int wire_proof_ok(const char *token, size_t len, const uint8_t nonce[WIRE_NONCE_LEN], const void *given,
		  size_t given_len);

/* ---- shared-memory segment for local clients ---- */
#define SHM_MAGIC 0x43494341u          /* "CICA" */
#define SHM_VERSION 1u
#define SHM_PIPE_SIZE (1u << 20)
#define SHM_MAX_SLOTS 16
#define SHM_MAX_SLOT_SIZE (64u << 20)

enum slot_state { SLOT_FREE = 0, SLOT_BUSY = 1, SLOT_READY = 2 };

struct shm_pipe {
	_Atomic uint64_t head;               /* bytes consumed */
	char pad0[56];
	_Atomic uint64_t tail;               /* bytes produced */
	char pad1[56];
	_Atomic uint32_t reader_sleeping;
	_Atomic uint32_t writer_sleeping;
	_Atomic uint32_t data_seq;           /* futex: data arrived */
	_Atomic uint32_t space_seq;          /* futex: space freed */
	uint64_t data_offset;                /* from the segment base */
	uint64_t size;
};

struct shm_header {
	uint32_t magic;
	uint32_t version;
	uint64_t size;
	struct shm_pipe to_server;
	struct shm_pipe to_client;
	uint64_t staging_offset;
	uint32_t slot_size;
	uint32_t nslots;
	_Atomic uint32_t slot_state[SHM_MAX_SLOTS];
	_Atomic int32_t slot_err[SHM_MAX_SLOTS];
	_Atomic uint32_t output_pending;     /* device output waits (output_flush) */
};

/* A segment as one side sees it. The server's side copies the geometry
 * out of the header once, at attach, after checking it: the client can
 * rewrite the header at any time, so nothing the worker uses as an
 * address or a length is ever read from it again. */
struct shm_segment {
	struct shm_header *hdr;
	size_t size;
	int fd;
	uint64_t staging_offset;             /* private copies, fixed at attach */
	uint64_t to_server_offset, to_client_offset;
	uint32_t slot_size, nslots;
};

int shm_segment_create(struct shm_segment *seg, uint32_t nslots, uint32_t slot_size);
int shm_segment_attach(struct shm_segment *seg, int fd, size_t size, char *err);
void shm_segment_detach(struct shm_segment *seg);
/* The slot's bytes, or NULL when slot or size is out of the segment's
 * geometry as fixed at create or attach. */
char *shm_slot(struct shm_segment *seg, unsigned slot, uint64_t size);
int shm_fd_seal(int fd);                 /* a memfd made so that it cannot shrink */
int shm_fd_sealed(int fd);
int shm_slot_wait(struct shm_segment *seg, unsigned slot, uint32_t state, int peer_fd, int poll);
void shm_slot_set(struct shm_segment *seg, unsigned slot, uint32_t state);

/* How shm_segment_attach maps a client's segment and shm_segment_detach
 * unmaps a segment: mmap(NULL, ...) and munmap unless a program sets
 * others, once, before it attaches any. The gpu-server's worker does, to
 * keep its own mappings at places of their own (gpu-server/state/
 * hostarea.c); the ring needs nothing else of where they go. */
#include <sys/types.h>
void shm_set_mapper(void *(*map)(size_t size, int prot, int flags, int fd, off_t off),
		    void (*unmap)(void *p, size_t size));

/* ---- byte streams ---- */
struct wire_stream {
	int fd;                              /* the socket, always present */
	struct shm_segment *shm;             /* NULL: data on the socket */
	struct shm_pipe *tx, *rx;
	char *tx_data, *rx_data;
	uint64_t rx_head, rx_tail;           /* shm reader: read, and the tail seen */
	uint64_t tx_head;                    /* shm writer: the reader's head as last seen */
	unsigned spin_us;                    /* a read spins this long before it sleeps */
	int poll_wait;                       /* then keeps polling (yielding), never sleeps */
};

void wire_stream_init(struct wire_stream *s, int fd);
void wire_stream_use_shm(struct wire_stream *s, struct shm_segment *seg, int server_side);
int wire_write(struct wire_stream *s, const void *buf, size_t len);
int wire_read(struct wire_stream *s, void *buf, size_t len);
int wire_peer_alive(int fd);

/* ---- ONC RPC records and messages ---- */
struct wire_buf {
	char *data;
	size_t len, cap;
};

int wire_buf_reserve(struct wire_buf *b, size_t cap);
void wire_buf_free(struct wire_buf *b);

int wire_send_record(struct wire_stream *s, struct wire_buf *b);
int wire_recv_record(struct wire_stream *s, struct wire_buf *b, size_t max);

enum wire_accept {
	WIRE_SUCCESS = 0, WIRE_PROG_UNAVAIL = 1, WIRE_PROG_MISMATCH = 2,
	WIRE_PROC_UNAVAIL = 3, WIRE_GARBAGE_ARGS = 4, WIRE_SYSTEM_ERR = 5,
};

struct wire_call_hdr {
	uint32_t xid, proc;
};

int wire_encode_call(struct wire_buf *b, uint32_t xid, uint32_t proc, xdrproc_t xargs, void *args);
int wire_decode_call(const struct wire_buf *b, struct wire_call_hdr *hdr, XDR *xdrs, char *err);
int wire_encode_reply(struct wire_buf *b, uint32_t xid, enum wire_accept stat, xdrproc_t xres, void *res);
int wire_record_is_call(const struct wire_buf *b);
int wire_decode_reply(const struct wire_buf *b, uint32_t xid, xdrproc_t xres, void *res, char *err);

/* Bulk lanes (interposer/lanes.c, gpu-server/calls/lanes.c): each chunk of a
 * lane copy crosses its lane behind this header, in network order. */
#define LANE_MAGIC 0x4c414e45u           /* "LANE" */
#define LANE_MAX 16
#define LANE_CHUNK_MIN (64u << 10)
#define LANE_CHUNK_MAX (4u << 20)           /* each lane pins two buffers of it */
#define LANE_COPY_MAX (1ull << 48)
struct lane_frame {
	uint32_t magic;
	uint32_t len;
	uint64_t offset;
};

/* The host function channel's status word: this call is the id's last
 * (the worker ran it once, not from a graph); a staged copy's bytes
 * follow (a u64 length, then the bytes), or are wanted back after the id
 * (a u64 length follows). The stream's status is what remains. */
#define HOSTFN_ONCE (1ull << 63)
#define HOSTFN_DATA (1ull << 62)
#define HOSTFN_WANT (1ull << 61)
#define HOSTFN_FLAGS (HOSTFN_ONCE | HOSTFN_DATA | HOSTFN_WANT)

/* ---- graph nodes: the slots of graph_params.v, by node type ---- */
enum { GK_FUNC, GK_GRID_X, GK_GRID_Y, GK_GRID_Z, GK_BLOCK_X, GK_BLOCK_Y, GK_BLOCK_Z, GK_SHMEM, GK_CTX, GK_N };
enum { GS_DST, GS_PITCH, GS_VALUE, GS_ELEMENT, GS_WIDTH, GS_HEIGHT, GS_CTX, GS_N };
/* a memcpy: each side is GM_SIDE scalars, the source's first */
enum { GM_TYPE, GM_DEVICE, GM_ARRAY, GM_X, GM_Y, GM_Z, GM_PITCH, GM_HEIGHT, GM_REGION, GM_SIDE };
enum { GM_WIDTH = 2 * GM_SIDE, GM_ROWS, GM_DEPTH, GM_CTX, GM_N };
/* a copy of the client's pageable memory (its side: GM_REGION 0, GM_DEVICE
 * the program's address) adds the client's host function id that moves
 * its bytes, and the shared stage of a local client (region 0: none, the
 * worker stages it and the bytes cross the host function channel) */
enum { GM_STAGE_ID = GM_N, GM_STAGE_REGION, GM_STAGE_OFF, GM_STAGED_N };
enum { GH_ID, GH_N };                        /* host: the client's function id */
enum { GE_EVENT, GE_N };                     /* event record, event wait */
enum { GC_GRAPH, GC_N };                     /* child graph */
enum { GA_BYTES, GA_DEVICE, GA_DPTR, GA_N }; /* memory alloc (GA_DPTR: out) */
enum { GF_DPTR, GF_N };                      /* memory free */
/* conditional: the handle, its type and number of bodies; the bodies'
 * graph ids come back in graph_params.data (8 bytes each) */
enum { GD_HANDLE, GD_TYPE, GD_SIZE, GD_CTX, GD_N };
/* graph_query ops */
enum { GQ_NODES, GQ_ROOTS, GQ_DEPS, GQ_DEPENDENTS, GQ_EDGES, GQ_CAPTURE_DEPS };

/* ---- control.c: a Cicada process's control socket ("\0cicada-ctl.<pid>"),
 * through which CRIU's plugin and gpu-migrate pause, resume and pre-copy
 * its GPU session (the protocol: control.c) ---- */
#define WIRE_CTL_PREFIX "cicada-ctl."
#define WIRE_CTL_LINE_MAX 2048
#define WIRE_CTL_PAUSE "PAUSE"
#define WIRE_CTL_IDLE "IDLE"
#define WIRE_CTL_RESUMED "RESUMED"
struct wire_ctl_where {                       /* where a session is: PAUSED, RESUME */
	char ticket[CICADA_TICKET_LEN + 1];
	char server[300];
	char token_hex[2 * CICADA_TOKEN_MAX + 1];     /* "-": none; RESUME: "" none */
	char token_file[420];                         /* where the process read it; "-": nowhere */
};
int wire_ctl_listen(int pid);
int wire_ctl_dial(int pid);
int wire_ctl_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));   /* one line */
int wire_ctl_send_paused(int fd, const struct wire_ctl_where *w);
int wire_ctl_send_resume(int fd, const struct wire_ctl_where *w);
int wire_ctl_send_precopy(int fd, const char *name, const char *parent, int dirfd);
int wire_ctl_send_precopied(int fd, const uint64_t fig[3]);
int wire_ctl_parse_paused(const char *line, struct wire_ctl_where *w);
int wire_ctl_parse_resume(const char *line, struct wire_ctl_where *w);
int wire_ctl_parse_precopy(const char *line, char *name, size_t nlen, char *parent, size_t plen);
int wire_ctl_parse_precopied(const char *line, uint64_t fig[3]);
const char *wire_ctl_reason(const char *line);   /* an ERROR line's reason, else the line */

/* ---- nvml_query (cicada.x: nvml_func, and what each carries) ---- */
#define NVMLF_FIRST_DEVICE NVMLF_NAME         /* from here on, about one device */
#define NVML_PROC_MAX (NVML_DATA_MAX / NVML_PROC_RECORD)

static inline void wire_put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t wire_get_be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- logging (level from CICADA_LOG at run time) ---- */
enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };
void log_init(const char *prog);
void log_set_fd(int fd);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_every(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_escape(const char *in, char *out, size_t len);
/* err gets the message, one line (control characters become spaces); -1 */
int wire_fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

uint64_t wire_now_ns(void);

/* proc.c: sig to a process and every descendant (children first) */
void wire_signal_tree(int pid, int sig);

/* attr.c */
size_t wire_pointer_attr_size(unsigned attr);
int wire_jit_option_plain(unsigned option);

#endif
