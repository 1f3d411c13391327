/* Preloaded into TFF's worker_binary (tff_mixed.execution.LocalWorker): the
 * worker binds its gRPC port on every interface ("[::]:PORT", no other
 * choice); this turns a bind to the wildcard address into a bind to
 * loopback, so a local worker is reachable from this machine only. Every
 * other bind is passed through unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

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
