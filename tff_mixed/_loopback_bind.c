/* Preloaded into TFF's worker_binary (tff_mixed.execution.LocalWorker).
 *
 * 1. The worker binds its gRPC port on every interface ("[::]:PORT", no
 *    other choice); this turns a bind to the wildcard address into a bind
 *    to loopback, so a local worker is reachable from this machine only.
 *    Every other bind is passed through unchanged.
 * 2. Its gRPC is unauthenticated and runs any TensorFlow it is sent, so on
 *    a machine shared with other users loopback is not enough: each
 *    connection it accepts is kept only if the socket at its other end
 *    belongs to this process's user (the kernel's table of TCP sockets,
 *    /proc/net/tcp and tcp6, gives each socket's owner); any other
 *    connection is closed at once, before the worker reads a byte. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (addr != NULL && addr->sa_family == AF_INET &&
      len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in in4;
    memcpy(&in4, addr, sizeof(in4));
    if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
      in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real_bind(fd, (const struct sockaddr *)&in4, sizeof(in4));
    }
  } else if (addr != NULL && addr->sa_family == AF_INET6 &&
             len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6;
    memcpy(&in6, addr, sizeof(in6));
    if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0) {
      /* [::] becomes ::ffff:127.0.0.1 (IPv4 loopback on this dual-stack
       * socket), which the Python side connects to. */
      static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                               0, 0, 0xff, 0xff, 127, 0, 0, 1};
      memcpy(&in6.sin6_addr, mapped, sizeof(mapped));
      return real_bind(fd, (const struct sockaddr *)&in6, sizeof(in6));
    }
  }
  return real_bind(fd, addr, len);
}

/* The owner of the TCP socket whose local port is `port` and whose remote
 * port is `remote_port`, from `table` (/proc/net/tcp or tcp6), or -1. */
static long owner_in(const char *table, unsigned port, unsigned remote_port) {
  FILE *f = fopen(table, "r");
  if (f == NULL) return -1;
  char line[512];
  long owner = -1;
  if (fgets(line, sizeof(line), f) == NULL) { /* The header. */
    fclose(f);
    return -1;
  }
  while (owner < 0 && fgets(line, sizeof(line), f) != NULL) {
    char local[64], remote[64];
    unsigned state;
    long uid;
    if (sscanf(line, "%*s %63s %63s %x %*s %*s %*s %ld", local, remote,
               &state, &uid) != 4)
      continue;
    const char *lp = strrchr(local, ':'), *rp = strrchr(remote, ':');
    unsigned lport, rport;
    if (lp == NULL || rp == NULL || sscanf(lp + 1, "%x", &lport) != 1 ||
        sscanf(rp + 1, "%x", &rport) != 1)
      continue;
    if (lport == port && rport == remote_port) owner = uid;
  }
  fclose(f);
  return owner;
}

static unsigned port_of(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)a)->sin_port);
  if (a->ss_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
  return 0;
}

/* Whether the peer of accepted socket `fd` is a socket of this user. Only
 * TCP over IP is checked (the worker's gRPC port); anything else passes. */
static int peer_is_ours(int fd) {
  struct sockaddr_storage mine, theirs;
  socklen_t mine_len = sizeof(mine), theirs_len = sizeof(theirs);
  if (getsockname(fd, (struct sockaddr *)&mine, &mine_len) != 0 ||
      getpeername(fd, (struct sockaddr *)&theirs, &theirs_len) != 0)
    return 0;
  if (theirs.ss_family != AF_INET && theirs.ss_family != AF_INET6) return 1;
  /* The peer's socket: its local port is the peer's, its remote ours. */
  unsigned port = port_of(&theirs), remote_port = port_of(&mine);
  long owner = owner_in("/proc/net/tcp", port, remote_port);
  if (owner < 0) owner = owner_in("/proc/net/tcp6", port, remote_port);
  return owner >= 0 && (uid_t)owner == geteuid();
}

typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);

/* Closes accepted connections that are not this user's; says EAGAIN, as an
 * empty non-blocking queue does, so the caller waits for the next one. */
static int kept(int fd) {
  if (fd < 0 || peer_is_ours(fd)) return fd;
  close(fd);
  errno = EAGAIN;
  return -1;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  static accept4_fn real_accept4 = NULL;
  if (real_accept4 == NULL)
    real_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
  return kept(real_accept4(fd, addr, len, flags));
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  static accept_fn real_accept = NULL;
  if (real_accept == NULL) real_accept = (accept_fn)dlsym(RTLD_NEXT, "accept");
  return kept(real_accept(fd, addr, len));
}
