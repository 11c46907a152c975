/*
 * tls.c: TLS for "tls:host:port" addresses, through OpenSSL. The TLS
 * session ends in a relay: a thread that moves plaintext between the TLS
 * connection and one end of a socketpair, whose other end the caller gets
 * as if it were the TCP connection itself. So every user of a connection
 * (the challenge and hello, the host-function channel, the bulk lanes, a
 * descriptor handed to a worker) works the same over TLS, and the TLS
 * state never has to leave the process that made it.
 *
 * The client verifies the server's certificate against CICADA_TLS_CA (a
 * PEM file: a CA, or the server's self-signed certificate), else the
 * system's trust store, and checks the host name or address it dialled.
 * The server's certificate and key are set with wire_tls_server_init.
 * Inside TLS the usual challenge and token proof still run.
 *
 * Mutual TLS: with a client CA (--tls-client-ca) the server asks every
 * client for a certificate and takes only one that chains to that CA;
 * the client's name is its certificate's subject CN (one CN, printable,
 * at most WIRE_TLS_NAME_MAX - 1 bytes, no '/', ',', '=' or space), else
 * the handshake is refused. A client presents CICADA_TLS_CERT and
 * CICADA_TLS_KEY (PEM files). In TLS 1.3 a client learns that its
 * certificate was refused only after its handshake, so it waits for the
 * server's first bytes (the challenge) before it calls the connection
 * made: a refusal is then an error of the dial, not a closed connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "wire.h"

#define RELAY_BUF (256u << 10)
#define HANDSHAKE_MS 10000                 /* the client's */

#define NAMELESS "the client's certificate has not one subject CN that names a client " \
		 "(printable, at most 63 bytes, no space, '/', ',' or '=')"

static SSL_CTX *server_ctx;
static int server_names;                   /* clients must present a certificate (a client CA) */

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#define SSL_get1_peer_certificate SSL_get_peer_certificate
#endif

/* what, with OpenSSL's reason for the last error in parentheses: no
 * colon, so that a client's message keeps it whole (interposer/client.c
 * shows what follows a dial error's last colon). */
static void tls_error(char *err, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	if (e)
		wire_fail(err, "%s (%s)", what, reason ? reason : "unknown reason");
	else
		wire_fail(err, "%s", what);
	ERR_clear_error();
}

/* Whether name may name a TLS client: printable, no space, no '/', ','
 * or '=' (it appears in policies and logs), 1 to WIRE_TLS_NAME_MAX - 1
 * bytes. */
int wire_tls_name_ok(const char *name)
{
	size_t n = strnlen(name, WIRE_TLS_NAME_MAX);

	if (!n || n == WIRE_TLS_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (name[i] <= ' ' || name[i] > '~' || strchr("/,=", name[i]))
			return 0;
	return 1;
}

/* A client certificate's name (its one subject CN) into name: 0, or -1
 * (none, or one that does not name a client: name is then ""). */
static int cert_name(X509 *cert, char name[WIRE_TLS_NAME_MAX])
{
	X509_NAME *subject = cert ? X509_get_subject_name(cert) : NULL;
	int i = subject ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1, n = -1;
	unsigned char *text = NULL;

	if (i >= 0 && X509_NAME_get_index_by_NID(subject, NID_commonName, i) < 0)
		n = ASN1_STRING_to_UTF8(&text, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
	if (n > 0 && n < WIRE_TLS_NAME_MAX && !memchr(text, 0, (size_t)n)) {
		memcpy(name, text, (size_t)n);
		name[n] = 0;
	} else {
		name[0] = 0;
	}
	OPENSSL_free(text);
	return wire_tls_name_ok(name) ? 0 : -1;
}

/* The server's check of a client's chain, beside OpenSSL's: the client's
 * own certificate must name a client, else the handshake fails with a
 * bad_certificate alert (the client learns why), the SSL marked nameless
 * (its app data) for the server's log. */
static int verify_client(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	char name[WIRE_TLS_NAME_MAX];

	if (ok && X509_STORE_CTX_get_error_depth(x) == 0 && cert_name(X509_STORE_CTX_get_current_cert(x), name)) {
		X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED);
		SSL_set_app_data(ssl, (void *)NAMELESS);
		return 0;
	}
	return ok;
}

/* The verified client's name into name: 0, or -1 with err. */
static int client_name(SSL *ssl, char name[WIRE_TLS_NAME_MAX], char *err)
{
	X509 *cert = SSL_get1_peer_certificate(ssl);
	int bad = cert_name(cert, name);

	X509_free(cert);
	return bad ? wire_fail(err, "TLS: %s", NAMELESS) : 0;
}

/* Asks every client for a certificate of the CA in file ca. */
static int want_client_certs(SSL_CTX *c, const char *ca, char *err)
{
	STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);

	if (!names || SSL_CTX_load_verify_locations(c, ca, NULL) != 1) {
		sk_X509_NAME_pop_free(names, X509_NAME_free);
		tls_error(err, "cannot load --tls-client-ca (a PEM file of CA certificates)");
		return -1;
	}
	SSL_CTX_set_client_CA_list(c, names);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_client);
	SSL_CTX_set_session_id_context(c, (const unsigned char *)"cicada", 6);
	return 0;
}

int wire_tls_server_init(const char *cert, const char *key, const char *client_ca, char *err)
{
	SSL_CTX *c = SSL_CTX_new(TLS_server_method());

	if (!c) {
		tls_error(err, "cannot make a TLS context");
		return -1;
	}
	SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
	if (SSL_CTX_use_certificate_chain_file(c, cert) != 1) {
		tls_error(err, "cannot load the TLS certificate");
		SSL_CTX_free(c);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(c) != 1) {
		tls_error(err, "cannot load the TLS key (or it does not fit the certificate)");
		SSL_CTX_free(c);
		return -1;
	}
	if (client_ca && want_client_certs(c, client_ca, err)) {
		SSL_CTX_free(c);
		return -1;
	}
	server_ctx = c;
	server_names = client_ca != NULL;
	return 0;
}

int wire_tls_server_ready(void)
{
	return server_ctx != NULL;
}

/* Whether the last error is the peer's alert about our certificate. */
static int cert_refused_alert(void)
{
	int r = ERR_GET_REASON(ERR_peek_last_error());

	return r == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED || r == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
	       r == SSL_R_TLSV1_ALERT_UNKNOWN_CA || r == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
	       r == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED || r == SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED ||
	       r == SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE || r == SSL_R_TLSV1_ALERT_ACCESS_DENIED;
}

/* One line for a failed handshake (or first read), by side. */
static void handshake_error(SSL *ssl, int server, char *err)
{
	long v = SSL_get_verify_result(ssl);

	if (server && SSL_get_app_data(ssl)) {
		wire_fail(err, "TLS: %s", NAMELESS);
		ERR_clear_error();
	} else if (server && server_names && v != X509_V_OK) {
		wire_fail(err, "TLS: the client's certificate is not trusted (%s; --tls-client-ca)",
			  X509_verify_cert_error_string(v));
		ERR_clear_error();
	} else if (server && ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
		wire_fail(err, "TLS: the client sent no certificate (--tls-client-ca requires one)");
		ERR_clear_error();
	} else if (!server && v != X509_V_OK) {
		wire_fail(err, "TLS: the server's certificate is not trusted (%s); "
			  "CICADA_TLS_CA names the file of its CA", X509_verify_cert_error_string(v));
	} else if (!server && cert_refused_alert()) {
		wire_fail(err, "TLS: the server refused this client's certificate, or its lack of one (%s); "
			  "CICADA_TLS_CERT and CICADA_TLS_KEY name a certificate of the server's client CA",
			  ERR_reason_error_string(ERR_peek_last_error()));
		ERR_clear_error();
	} else {
		tls_error(err, "TLS handshake failed");
	}
}

static int do_accept(SSL *ssl)
{
	return SSL_accept(ssl);
}

static int do_connect(SSL *ssl)
{
	return SSL_connect(ssl);
}

static int do_peek(SSL *ssl)
{
	char c;
	int n = SSL_peek(ssl, &c, 1);

	return n > 0 ? 1 : n;
}

/* Runs step (a handshake, or the wait for the first byte) within ms
 * milliseconds in all, however the peer trickles it (the socket is
 * non-blocking meanwhile). 0, or -1 with err. */
static int tls_step(SSL *ssl, int (*step)(SSL *), int server, int ms, char *err)
{
	int fd = SSL_get_fd(ssl), flags = fcntl(fd, F_GETFL), rc;
	struct timespec t0, now;

	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = fd };
		long left;
		int e;

		rc = step(ssl);
		if (rc == 1)
			break;
		e = SSL_get_error(ssl, rc);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		p.events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			wire_fail(err, "TLS %s: nothing within %d ms", step == do_peek ? "challenge" : "handshake", ms);
			fcntl(fd, F_SETFL, flags);
			return -1;
		}
	}
	fcntl(fd, F_SETFL, flags);
	if (rc != 1) {
		if (step == do_peek && !ERR_peek_error())
			wire_fail(err, "TLS: the server closed the connection before its challenge");
		else
			handshake_error(ssl, server, err);
		return -1;
	}
	return 0;
}

/* OpenSSL writes with write(): a peer gone would raise SIGPIPE in the
 * application. The calling thread blocks it meanwhile, and a SIGPIPE
 * that came of it is taken before the old mask returns. */
static void sigpipe_hold(sigset_t *old)
{
	sigset_t pipe;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, old);
}

static void sigpipe_release(const sigset_t *old)
{
	struct timespec zero = { 0, 0 };
	sigset_t pipe, pending;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigpending(&pending);
	if (sigismember(&pending, SIGPIPE) && !sigismember(old, SIGPIPE))
		sigtimedwait(&pipe, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* The client's certificate and key, if CICADA_TLS_CERT and
 * CICADA_TLS_KEY name them (for a server with --tls-client-ca). */
static int client_cert(SSL_CTX *ctx, char *err)
{
	const char *cert = getenv("CICADA_TLS_CERT"), *key = getenv("CICADA_TLS_KEY");
	int has_cert = cert && *cert, has_key = key && *key;

	if (has_cert != has_key)
		return wire_fail(err, "TLS: CICADA_TLS_CERT and CICADA_TLS_KEY go together (%s is not set)",
				 has_cert ? "CICADA_TLS_KEY" : "CICADA_TLS_CERT");
	if (!has_cert)
		return 0;
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		tls_error(err, "cannot load CICADA_TLS_CERT");
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
		tls_error(err, "cannot load CICADA_TLS_KEY (or it does not fit CICADA_TLS_CERT)");
		return -1;
	}
	return 0;
}

static SSL_CTX *client_ctx(char *err)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static SSL_CTX *ctx;
	const char *ca = getenv("CICADA_TLS_CA");

	pthread_mutex_lock(&lock);
	if (!ctx && (ctx = SSL_CTX_new(TLS_client_method()))) {
		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		if ((ca && *ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL) : SSL_CTX_set_default_verify_paths(ctx)) != 1) {
			tls_error(err, ca && *ca ? "cannot load CICADA_TLS_CA" : "cannot load the system's trust store");
			SSL_CTX_free(ctx);
			ctx = NULL;
		} else if (client_cert(ctx, err)) {
			SSL_CTX_free(ctx);
			ctx = NULL;
		}
	} else if (!ctx) {
		tls_error(err, "cannot make a TLS context");
	}
	pthread_mutex_unlock(&lock);
	return ctx;
}

/* --- the relay ----------------------------------------------------------- */

struct relay {
	SSL *ssl;
	int net, inner;
	char *to_inner, *to_net;             /* plaintext waiting to be written */
	size_t in_len, in_off, net_len, net_off;
};

static void relay_free(struct relay *r)
{
	SSL_free(r->ssl);
	close(r->net);
	close(r->inner);
	free(r->to_inner);
	free(r->to_net);
	free(r);
}

/* Moves what can move without blocking; -1 when either side has ended. */
static int relay_step(struct relay *r, int *want_net_write)
{
	int progress = 1;

	*want_net_write = 0;
	while (progress) {
		progress = 0;
		if (r->in_len == r->in_off) {
			int n = SSL_read(r->ssl, r->to_inner, RELAY_BUF);

			if (n > 0) {
				r->in_len = (size_t)n, r->in_off = 0, progress = 1;
			} else {
				int e = SSL_get_error(r->ssl, n);
				if (e == SSL_ERROR_WANT_WRITE)
					*want_net_write = 1;
				else if (e != SSL_ERROR_WANT_READ)
					return -1;
			}
		}
		if (r->in_off < r->in_len) {
			ssize_t n = send(r->inner, r->to_inner + r->in_off, r->in_len - r->in_off, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0)
				r->in_off += (size_t)n, progress = 1;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
		}
		if (r->net_len == r->net_off) {
			ssize_t n = recv(r->inner, r->to_net, RELAY_BUF, MSG_DONTWAIT);

			if (n > 0)
				r->net_len = (size_t)n, r->net_off = 0, progress = 1;
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				return -1;
		}
		if (r->net_off < r->net_len) {
			int n = SSL_write(r->ssl, r->to_net + r->net_off, (int)(r->net_len - r->net_off));

			if (n > 0) {
				r->net_off += (size_t)n, progress = 1;
			} else {
				int e = SSL_get_error(r->ssl, n);
				if (e == SSL_ERROR_WANT_WRITE)
					*want_net_write = 1;
				else if (e != SSL_ERROR_WANT_READ)
					return -1;
			}
		}
	}
	return 0;
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	sigset_t old;

	sigpipe_hold(&old);                  /* this thread's for good: a write to a peer gone fails */
	for (;;) {
		int want_write;
		struct pollfd p[2];

		if (relay_step(r, &want_write))
			break;
		if (SSL_pending(r->ssl) && r->in_len == r->in_off)
			continue;
		p[0] = (struct pollfd){ .fd = r->net, .events = (short)((r->in_len == r->in_off ? POLLIN : 0) |
									 (want_write || r->net_off < r->net_len ? POLLOUT : 0)) };
		p[1] = (struct pollfd){ .fd = r->inner, .events = (short)((r->net_len == r->net_off ? POLLIN : 0) |
									   (r->in_off < r->in_len ? POLLOUT : 0)) };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if ((p[0].revents | p[1].revents) & (POLLERR | POLLNVAL))
			break;
		if ((p[1].revents & POLLHUP) && r->net_len == r->net_off && !(p[1].revents & POLLIN))
			break;
	}
	SSL_shutdown(r->ssl);
	relay_free(r);
	return NULL;
}

/* Starts the relay of an established TLS connection; returns the inner
 * end, or -1 (the connection is closed). */
static int relay_start(SSL *ssl, int net, char *err)
{
	struct relay *r = calloc(1, sizeof(*r));
	int sv[2] = { -1, -1 };
	pthread_attr_t a;
	pthread_t t;

	if (!r || !(r->to_inner = malloc(RELAY_BUF)) || !(r->to_net = malloc(RELAY_BUF)) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		wire_fail(err, "cannot start a TLS relay: %s", strerror(errno));
		goto fail;
	}
	r->ssl = ssl, r->net = net, r->inner = sv[0];
	fcntl(net, F_SETFL, fcntl(net, F_GETFL) | O_NONBLOCK);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, relay_main, r)) {
		pthread_attr_destroy(&a);
		wire_fail(err, "cannot start a TLS relay thread");
		goto fail;
	}
	pthread_attr_destroy(&a);
	return sv[1];
fail:
	if (sv[0] >= 0)
		close(sv[0]), close(sv[1]);
	if (r) {
		free(r->to_inner);
		free(r->to_net);
		free(r);
	}
	SSL_free(ssl);
	close(net);
	return -1;
}

/* The client's side: TLS over a dialled TCP socket fd (consumed). */
int wire_tls_client(int fd, const char *host, char *err)
{
	SSL_CTX *ctx = client_ctx(err);
	unsigned char ip[16];
	sigset_t old;
	SSL *ssl;
	int bad;

	if (!ctx || !(ssl = SSL_new(ctx))) {
		if (ctx)
			tls_error(err, "cannot start TLS");
		close(fd);
		return -1;
	}
	SSL_set_fd(ssl, fd);
	if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1)
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
	else {
		SSL_set_tlsext_host_name(ssl, host);
		SSL_set1_host(ssl, host);
	}
	sigpipe_hold(&old);
	bad = tls_step(ssl, do_connect, 0, HANDSHAKE_MS, err) || tls_step(ssl, do_peek, 0, HANDSHAKE_MS, err);
	sigpipe_release(&old);
	if (bad) {
		SSL_free(ssl);
		close(fd);
		return -1;
	}
	return relay_start(ssl, fd, err);
}

/* The server's side: TLS over an accepted socket fd (consumed), its
 * handshake within ms milliseconds. name gets the client's verified name
 * (with a client CA), else "". */
int wire_tls_server(int fd, int ms, char name[WIRE_TLS_NAME_MAX], char *err)
{
	sigset_t old;
	SSL *ssl;

	name[0] = 0;
	sigpipe_hold(&old);                  /* the server ignores SIGPIPE; held all the same */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (!server_ctx || !(ssl = SSL_new(server_ctx))) {
		tls_error(err, "cannot start TLS");
		close(fd);
		return -1;
	}
	SSL_set_fd(ssl, fd);
	if (tls_step(ssl, do_accept, 1, ms, err) || (server_names && client_name(ssl, name, err))) {
		SSL_free(ssl);
		close(fd);
		return -1;
	}
	return relay_start(ssl, fd, err);
}
