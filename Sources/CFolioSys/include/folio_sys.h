#ifndef FOLIO_SYS_H
#define FOLIO_SYS_H
// Linux calls that Swift's Glibc module does not import (glibc declares them only under _GNU_SOURCE, which
// cannot be defined here without changing struct layouts that other modules share) and variadic ones.
// Each shim keeps the C return value and errno untouched, so callers report the real code.
#include <sys/types.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <spawn.h>
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>

extern ssize_t copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len, unsigned int flags);
extern int syncfs(int fd);
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
extern int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags);
extern int pthread_setname_np(pthread_t thread, const char *name);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

static inline ssize_t folio_copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len) {
    return copy_file_range(fd_in, off_in, fd_out, off_out, len, 0);
}

static inline int folio_syncfs(int fd) { return syncfs(fd); }

/// Whether `signal_number` is ignored (SIG_IGN): `nohup` starts a command with SIGHUP so. Why C: Swift cannot compare
/// the handler's function pointer with SIG_IGN.
static inline int folio_signal_is_ignored(int signal_number) {
    struct sigaction current;
    return sigaction(signal_number, NULL, &current) == 0 && current.sa_handler == SIG_IGN;
}

/// Renames like renameat, but atomically refuses (EEXIST) to replace an entry already at the new name
/// (RENAME_NOREPLACE). Fails with EINVAL where the file system cannot do it (NFS, some FUSE ones).
static inline int folio_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, 1u);
}

/// Starts writeback of a file's dirty pages in [offset, offset + nbytes) (0 bytes: to the end) without waiting
/// for it (SYNC_FILE_RANGE_WRITE); the later syncfs then waits only for what is still in flight.
static inline int folio_start_writeback(int fd, off_t offset, off_t nbytes) {
    return sync_file_range(fd, offset, nbytes, 2u);
}

/// Turns direct I/O (O_DIRECT: writes go from the caller's buffer to the disk, past the page cache) on or off for
/// an open file. Fails with EINVAL where the file system does not support it. O_DIRECT is a _GNU_SOURCE name
/// for glibc's __O_DIRECT, which every architecture's <fcntl.h> defines.
static inline int folio_set_direct_io(int fd, int on) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, on ? (flags | __O_DIRECT) : (flags & ~__O_DIRECT));
}

/// The type of the file system an open file is on (statfs's f_type: 0xEF53 for ext2/3/4, ...), 0 on error.
static inline unsigned long folio_file_system_type(int fd) {
    struct statfs info;
    return fstatfs(fd, &info) == 0 ? (unsigned long)info.f_type : 0;
}

/// Whether direct I/O is on for an open file (1), off (0), or -1 on error.
static inline int folio_is_direct_io(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : (flags & __O_DIRECT) != 0;
}

/// Names the calling thread as `top -H`, `perf` and /proc show it (at most 15 bytes; a longer name fails with
/// ERANGE and leaves the old one).
static inline int folio_name_this_thread(const char *name) { return pthread_setname_np(pthread_self(), name); }

/// Opens a folder without following a symlink in the last component.
static inline int folio_openat_dir_nofollow(int dirfd, const char *name) {
    return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/// open and openat are variadic in C; these fix their arguments.
static inline int folio_open(const char *path, int flags) {
    return open(path, flags | O_CLOEXEC);
}

static inline int folio_openat(int dirfd, const char *name, int flags) {
    return openat(dirfd, name, flags | O_CLOEXEC);
}

/// Names the file at `name` below `dirfd` (links followed) without opening it for reading or writing: the
/// descriptor serves fstat, /proc/self/fd and a reopen, and the open has no effect on a FIFO or device. O_PATH
/// is a _GNU_SOURCE name for glibc's __O_PATH.
static inline int folio_openat_path(int dirfd, const char *name) {
    return openat(dirfd, name, __O_PATH | O_CLOEXEC);
}

static inline int folio_openat_create(int dirfd, const char *name, int flags, mode_t mode) {
    return openat(dirfd, name, flags | O_CLOEXEC, mode);
}

/// Opens the file at the relative `path` below `dirfd` for reading, following no symbolic link in any component
/// (ELOOP where one stands; ENOTDIR for a folder on the way, without openat2) and never leaving `dirfd`'s tree:
/// a source folder swapped for a link after the listing cannot lead a download outside the source. O_NONBLOCK,
/// so that a file swapped for a FIFO cannot hold the open until a writer comes (it changes nothing for a regular
/// file). With openat2 where the kernel has it, else one component at a time.
int folio_open_file_beneath(int dirfd, const char *path);

/// Grows this process's descriptor table to hold `highest` + 1 descriptors (less when RLIMIT_NOFILE is lower);
/// returns 0, or -1 with errno. Call it first in main, while the process has one thread. Why: a run holds more
/// than the 64 descriptors a process starts with (16 partial-file shards, up to 16 connections with their curl
/// socketpairs, the state database), and Linux grows a table shared by several threads only after an RCU grace
/// period, which stalls every thread opening a descriptor meanwhile: a no-change WebDAV run of 1,000 files took
/// 18.5 ms instead of 12 (measured under /usr/bin/time, whose children start with the smallest table). A process
/// with one thread grows it at no cost, and the table never shrinks.
int folio_reserve_descriptor_table(int highest);

/// Has the spawned program start with every descriptor from `from` up closed (glibc 2.34).
static inline int folio_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

/// How many bytes wait unread in the pipe whose write end is `fd` (FIONREAD; -1 if it cannot tell). A shim because
/// ioctl is variadic.
static inline int folio_unread_bytes(int fd) {
    int count = 0;
    return ioctl(fd, FIONREAD, &count) == 0 ? count : -1;
}

/// Whether child `pid` has ended, without reaping it (WNOWAIT: its pid stays reserved for whoever reaps it); one
/// already reaped (ECHILD) has too. A shim because the answer is siginfo_t's si_pid, which sits in a union Swift
/// does not import by name.
static inline int folio_child_has_ended(pid_t pid) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
    return info.si_pid == pid;
}

/// Blocks of 128 KiB and more (a listing's arrays: 6 MB at 100,000 entries) always come from mmap and go back to
/// the system when freed. glibc otherwise raises its threshold after the first such free, and later big arrays
/// then stay resident in the heap once freed: at 100,000 files that was 5-15 MB of a run's peak, and a daemon's
/// footprint between runs.
static inline int folio_return_large_blocks_to_system(void) { return mallopt(M_MMAP_THRESHOLD, 128 * 1024); }

/// Caps malloc at `count` arenas (M_ARENA_MAX). glibc gives each thread that finds the arenas busy one of its own,
/// up to eight per core, and a block freed into one arena serves only the threads that allocate from it: with a
/// listing's sessions, eight download workers and the installer each on an arena, a first mirror of 100,000 files
/// over SFTP peaked at 67 MB, 60 MB with two. Folio's threads mostly wait on sockets and disks, so two arenas are
/// seldom contended.
static inline int folio_limit_malloc_arenas(int count) { return mallopt(M_ARENA_MAX, count); }

/// Gives the free pages of every malloc arena back to the system (malloc_trim). Why: blocks freed by one thread
/// return to the arena of the thread that allocated them, which other threads do not draw from; after the
/// destination walk's 100,000 path copies are dropped, their pages would otherwise stay resident while the
/// record and the plan are allocated elsewhere.
static inline int folio_return_free_pages_to_system(void) { return malloc_trim(0); }

/// One function a dynamically loaded library must provide: its name and where to store its address.
struct folio_symbol {
    const char *name;
    void **slot;
};

/// Opens the shared library `soname` (dlopen, RTLD_LAZY | RTLD_LOCAL) and stores the address of each of `symbols`
/// in its slot. Returns NULL on success, else a message for people (dlerror's text, or which function is
/// missing), allocated once and never freed: callers load each library once per process.
const char *folio_load_library(const char *soname, const struct folio_symbol *symbols, size_t count);

/* Defines, for a library loaded on first use: a `loaded_<name>` pointer for each function of FUNCTIONS (an X-macro
   list of the functions Folio calls) and `const char *LOADER(void)`, which loads SONAME once and fills them (see
   folio_load_library for what it returns). Why pthread_once: sources on several threads may ask at once; the
   pointers are written once, before any caller sees NULL, and only read after. */
#define FOLIO_LOADED_POINTER(name) static __typeof__(name) *loaded_##name;
#define FOLIO_LOADED_SYMBOL(name) {#name, (void **)&loaded_##name},
#define FOLIO_DEFINE_LOADER(LOADER, SONAME, FUNCTIONS) \
    FUNCTIONS(FOLIO_LOADED_POINTER) \
    static const char *LOADER##_error; \
    static void LOADER##_once(void) { \
        static const struct folio_symbol symbols[] = {FUNCTIONS(FOLIO_LOADED_SYMBOL)}; \
        LOADER##_error = folio_load_library(SONAME, symbols, sizeof symbols / sizeof symbols[0]); \
    } \
    const char *LOADER(void) { \
        static pthread_once_t once = PTHREAD_ONCE_INIT; \
        pthread_once(&once, LOADER##_once); \
        return LOADER##_error; \
    }

#endif
