#ifndef FOLIO_CLIBSSH2_H
#define FOLIO_CLIBSSH2_H
#include <libssh2.h>
#include <libssh2_sftp.h>

/* libssh2 is loaded with dlopen the first time an SFTP source needs it, not linked, so that runs without an SFTP
   target do not pay for loading it and OpenSSL (~3 ms and ~3 MB a process). loader.c defines each libssh2
   function Folio calls as a hidden forwarder to the loaded library, so Swift and the shims below call the usual
   names.

   Loads libssh2.so.1 once; returns NULL when every function Folio uses is there, else what went wrong (the
   dlerror text or the missing function). No libssh2 function may be called before it returned NULL. */
const char *folio_ssh2_load(void);

/* Makes the session acknowledge every TCP segment it reads at once (TCP_QUICKACK). Why: sshd leaves Nagle's
   algorithm on for non-interactive sessions, so a small reply waits until our previous segment is acknowledged;
   with Linux's delayed ACKs that stalled each request/reply turn of authentication and exec by ~40 ms (two such
   stalls were half of a 190 ms no-change run on loopback). */
void folio_ssh2_acknowledge_at_once(LIBSSH2_SESSION *session);

/* Logs in by keyboard-interactive (how PAM asks for a password: FreeBSD's and macOS's sshd by default), answering
   the first hidden prompt with `password` and nothing else. */
int folio_ssh2_userauth_password_prompts(LIBSSH2_SESSION *session, const char *user, unsigned int userLength,
                                         const char *password, unsigned int passwordLength);

// Swift cannot import libssh2's function-like macros; these static inline shims give them names it can call.

static inline LIBSSH2_SESSION *folio_ssh2_session_init(void *abstract) {
    return libssh2_session_init_ex(NULL, NULL, NULL, abstract);
}

static inline int folio_ssh2_session_disconnect(LIBSSH2_SESSION *session, const char *description) {
    return libssh2_session_disconnect_ex(session, SSH_DISCONNECT_BY_APPLICATION, description, "");
}

static inline int folio_ssh2_userauth_publickey_fromfile(LIBSSH2_SESSION *session, const char *user, unsigned int userLength,
                                                         const char *privateKey, const char *passphrase) {
    return libssh2_userauth_publickey_fromfile_ex(session, user, userLength, NULL, privateKey, passphrase);
}

static inline int folio_ssh2_userauth_password(LIBSSH2_SESSION *session, const char *user, unsigned int userLength,
                                               const char *password, unsigned int passwordLength) {
    return libssh2_userauth_password_ex(session, user, userLength, password, passwordLength, NULL);
}

static inline LIBSSH2_CHANNEL *folio_ssh2_channel_open_session(LIBSSH2_SESSION *session) {
    return libssh2_channel_open_ex(session, "session", sizeof("session") - 1,
                                   LIBSSH2_CHANNEL_WINDOW_DEFAULT, LIBSSH2_CHANNEL_PACKET_DEFAULT, NULL, 0);
}

static inline int folio_ssh2_channel_exec(LIBSSH2_CHANNEL *channel, const char *command, unsigned int length) {
    return libssh2_channel_process_startup(channel, "exec", sizeof("exec") - 1, command, length);
}

static inline int folio_ssh2_channel_subsystem(LIBSSH2_CHANNEL *channel, const char *name, unsigned int length) {
    return libssh2_channel_process_startup(channel, "subsystem", sizeof("subsystem") - 1, name, length);
}

static inline ssize_t folio_ssh2_channel_read(LIBSSH2_CHANNEL *channel, char *buffer, size_t length) {
    return libssh2_channel_read_ex(channel, 0, buffer, length);
}

static inline ssize_t folio_ssh2_channel_write(LIBSSH2_CHANNEL *channel, const char *buffer, size_t length) {
    return libssh2_channel_write_ex(channel, 0, buffer, length);
}

static inline LIBSSH2_SFTP_HANDLE *folio_ssh2_sftp_open(LIBSSH2_SFTP *sftp, const char *path, unsigned int length) {
    return libssh2_sftp_open_ex(sftp, path, length, LIBSSH2_FXF_READ, 0, LIBSSH2_SFTP_OPENFILE);
}

static inline LIBSSH2_SFTP_HANDLE *folio_ssh2_sftp_opendir(LIBSSH2_SFTP *sftp, const char *path, unsigned int length) {
    return libssh2_sftp_open_ex(sftp, path, length, 0, 0, LIBSSH2_SFTP_OPENDIR);
}

static inline int folio_ssh2_sftp_readdir(LIBSSH2_SFTP_HANDLE *handle, char *buffer, size_t length,
                                          LIBSSH2_SFTP_ATTRIBUTES *attributes) {
    return libssh2_sftp_readdir_ex(handle, buffer, length, NULL, 0, attributes);
}

static inline int folio_ssh2_sftp_stat(LIBSSH2_SFTP *sftp, const char *path, unsigned int length, int followLinks,
                                       LIBSSH2_SFTP_ATTRIBUTES *attributes) {
    return libssh2_sftp_stat_ex(sftp, path, length, followLinks ? LIBSSH2_SFTP_STAT : LIBSSH2_SFTP_LSTAT, attributes);
}

static inline int folio_ssh2_sftp_fstat(LIBSSH2_SFTP_HANDLE *handle, LIBSSH2_SFTP_ATTRIBUTES *attributes) {
    return libssh2_sftp_fstat_ex(handle, attributes, 0);
}

static inline int folio_ssh2_sftp_realpath(LIBSSH2_SFTP *sftp, const char *path, unsigned int length,
                                           char *target, unsigned int targetLength) {
    return libssh2_sftp_symlink_ex(sftp, path, length, target, targetLength, LIBSSH2_SFTP_REALPATH);
}

static inline int folio_ssh2_sftp_close(LIBSSH2_SFTP_HANDLE *handle) {
    return libssh2_sftp_close_handle(handle);
}

#endif
