/*
 * Preloaded into tritonserver by deploy/local/triton/guard.py (LD_PRELOAD).
 *
 * Triton 2.51 binds its SageMaker port to 0.0.0.0 and has no option to change
 * it, and that port loads any local folder as a model (`POST /models`). This
 * library keeps the port to the endpoint's front end:
 *
 *   bind()      a bind to the guarded port goes to the loopback address;
 *   accept()    a connection on the guarded port is closed at once unless it
 *   accept4()   comes from a socket owned by this user and, in the default
 *               mode, held by the front end's process (its /proc/PID/fd).
 *
 * It also keeps the python backend's shared memory (request and response
 * tensors) to this user. Boost.Interprocess creates the regions mode 0644 and
 * then fchmod()s them to 0644 so that the umask cannot narrow it:
 *
 *   shm_open()  creates with the owner's bits only;
 *   fchmod()    of a file in /dev/shm keeps the owner's bits only.
 *
 * The python-backend stubs inherit LD_PRELOAD, so their regions are covered too.
 *
 * Configured by the environment: DEPLOY_GUARD_PORT (the port), and
 * DEPLOY_GUARD_CLIENT_PID (the only process allowed; 0 or unset: any
 * process of this user). Everything else passes through untouched.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*shm_open_fn)(const char *, int, mode_t);
typedef int (*fchmod_fn)(int, mode_t);

static bind_fn real_bind;
static accept_fn real_accept;
static accept4_fn real_accept4;
static shm_open_fn real_shm_open;
static fchmod_fn real_fchmod;
static int guard_port = -1;
static long client_pid = 0;

__attribute__((constructor)) static void guard_init(void)
{
  const char *port = getenv("DEPLOY_GUARD_PORT");
  const char *pid = getenv("DEPLOY_GUARD_CLIENT_PID");
  real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  real_accept = (accept_fn)dlsym(RTLD_NEXT, "accept");
  real_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
  if (port != NULL) guard_port = atoi(port);
  if (pid != NULL) client_pid = atol(pid);
}

static int port_of(const struct sockaddr_storage *addr)
{
  if (addr->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)addr)->sin_port);
  if (addr->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
  return -1;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
  if (guard_port > 0 && addr != NULL) {
    if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
      struct sockaddr_in in;
      memcpy(&in, addr, sizeof in);
      if (ntohs(in.sin_port) == guard_port) {
        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return real_bind(fd, (const struct sockaddr *)&in, sizeof in);
      }
    } else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
      struct sockaddr_in6 in6;
      memcpy(&in6, addr, sizeof in6);
      if (ntohs(in6.sin6_port) == guard_port) {
        in6.sin6_addr = in6addr_loopback;
        return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
      }
    }
  }
  return real_bind(fd, addr, len);
}

/* An address as /proc/net/tcp{,6} prints it: the raw 32-bit words in hex, ":PORT". */
static void proc_format(const struct sockaddr_storage *addr, char *out, size_t size)
{
  if (addr->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
    snprintf(out, size, "%08X:%04X", (unsigned)in->sin_addr.s_addr, ntohs(in->sin_port));
  } else {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
    uint32_t words[4];
    memcpy(words, &in6->sin6_addr, sizeof words);
    snprintf(out, size, "%08X%08X%08X%08X:%04X", words[0], words[1], words[2], words[3],
             ntohs(in6->sin6_port));
  }
}

/* The uid and inode of the client's end of an accepted connection. */
static int client_socket(const struct sockaddr_storage *local, const struct sockaddr_storage *peer,
                         unsigned *uid, unsigned long *inode)
{
  char want_local[64], want_remote[64], line[512], got_local[64], got_remote[64];
  FILE *table = fopen(peer->ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "r");
  int found = 0;
  if (table == NULL) return 0;
  proc_format(peer, want_local, sizeof want_local);   /* the client's own address */
  proc_format(local, want_remote, sizeof want_remote); /* it is connected to ours */
  while (!found && fgets(line, sizeof line, table) != NULL) {
    if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %u %*s %lu", got_local, got_remote, uid,
               inode) == 4 &&
        strcmp(got_local, want_local) == 0 && strcmp(got_remote, want_remote) == 0)
      found = 1;
  }
  fclose(table);
  return found;
}

static int process_holds(long pid, unsigned long inode)
{
  char dir_path[64], link_path[320], target[64], want[64];
  struct dirent *entry;
  DIR *dir;
  int found = 0;
  snprintf(dir_path, sizeof dir_path, "/proc/%ld/fd", pid);
  snprintf(want, sizeof want, "socket:[%lu]", inode);
  dir = opendir(dir_path);
  if (dir == NULL) return 0;
  while (!found && (entry = readdir(dir)) != NULL) {
    ssize_t n;
    snprintf(link_path, sizeof link_path, "%s/%s", dir_path, entry->d_name);
    n = readlink(link_path, target, sizeof target - 1);
    if (n > 0) {
      target[n] = '\0';
      found = strcmp(target, want) == 0;
    }
  }
  closedir(dir);
  return found;
}

static int allowed(int fd)
{
  struct sockaddr_storage local, peer;
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  unsigned uid = 0;
  unsigned long inode = 0;
  if (guard_port <= 0 || getsockname(fd, (struct sockaddr *)&local, &local_len) != 0 ||
      port_of(&local) != guard_port)
    return 1; /* not the guarded port */
  if (getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0 ||
      (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) ||
      !client_socket(&local, &peer, &uid, &inode))
    return 0;
  if (uid != (unsigned)getuid()) return 0;
  return client_pid <= 0 || process_holds(client_pid, inode);
}

static void refused(void)
{
  fprintf(stderr, "deploy guard: closed a connection to port %d from a process other than %s\n",
          guard_port, client_pid > 0 ? "the endpoint's front end" : "this user's");
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
  socklen_t size = len != NULL ? *len : 0;
  for (;;) {
    int client = real_accept4(fd, addr, len, flags);
    if (client < 0 || allowed(client)) return client;
    close(client);
    refused();
    if (len != NULL) *len = size;
  }
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
  socklen_t size = len != NULL ? *len : 0;
  for (;;) {
    int client = real_accept(fd, addr, len);
    if (client < 0 || allowed(client)) return client;
    close(client);
    refused();
    if (len != NULL) *len = size;
  }
}

/* Looked up on first use: another library's constructor may call them before ours runs. */
int shm_open(const char *name, int oflag, mode_t mode)
{
  if (real_shm_open == NULL) real_shm_open = (shm_open_fn)dlsym(RTLD_NEXT, "shm_open");
  return real_shm_open(name, oflag, mode & S_IRWXU);
}

/* True when `fd` is a file in /dev/shm (POSIX shared memory). */
static int in_dev_shm(int fd)
{
  char link_path[64], target[32];
  ssize_t n;
  snprintf(link_path, sizeof link_path, "/proc/self/fd/%d", fd);
  n = readlink(link_path, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  return strncmp(target, "/dev/shm/", 9) == 0;
}

int fchmod(int fd, mode_t mode)
{
  if (real_fchmod == NULL) real_fchmod = (fchmod_fn)dlsym(RTLD_NEXT, "fchmod");
  return real_fchmod(fd, in_dev_shm(fd) ? mode & S_IRWXU : mode);
}
