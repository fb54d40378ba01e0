/* Loads libssh2 on first use and forwards Folio's libssh2 calls to it (see CLibSSH2.h for why). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "folio_sys.h"

/* Why hidden: these forwarders carry libssh2's own names so that Swift and the header's shims call the usual
   API; hidden keeps them out of Folio's dynamic symbol table (the Swift driver exports the executable's
   symbols), so libssh2's calls to its own functions still bind inside libssh2, never back to these. */
#pragma GCC visibility push(hidden)
#include "CLibSSH2.h"

#define FOLIO_SSH2_FUNCTIONS(X) \
    X(libssh2_init) X(libssh2_session_init_ex) X(libssh2_session_free) X(libssh2_session_set_blocking) \
    X(libssh2_session_set_timeout) X(libssh2_session_callback_set) X(libssh2_session_handshake) X(libssh2_session_hostkey) \
    X(libssh2_session_last_error) X(libssh2_session_block_directions) X(libssh2_session_banner_get) X(libssh2_session_disconnect_ex) X(libssh2_session_method_pref) X(libssh2_hostkey_hash) \
    X(libssh2_session_supported_algs) X(libssh2_free) X(libssh2_version) \
    X(libssh2_keepalive_config) X(libssh2_keepalive_send) X(libssh2_knownhost_init) X(libssh2_knownhost_free) \
    X(libssh2_knownhost_readline) X(libssh2_knownhost_checkp) X(libssh2_userauth_list) \
    X(libssh2_userauth_authenticated) X(libssh2_userauth_publickey_fromfile_ex) X(libssh2_userauth_password_ex) \
    X(libssh2_userauth_keyboard_interactive_ex) X(libssh2_session_abstract) \
    X(libssh2_agent_init) X(libssh2_agent_connect) X(libssh2_agent_list_identities) X(libssh2_agent_get_identity) \
    X(libssh2_agent_userauth) X(libssh2_agent_disconnect) X(libssh2_agent_free) X(libssh2_channel_open_ex) \
    X(libssh2_channel_process_startup) X(libssh2_channel_read_ex) X(libssh2_channel_write_ex) \
    X(libssh2_channel_handle_extended_data2) X(libssh2_channel_send_eof) X(libssh2_channel_close) \
    X(libssh2_channel_wait_closed) X(libssh2_channel_get_exit_status) X(libssh2_channel_get_exit_signal) \
    X(libssh2_channel_free) X(libssh2_sftp_init) \
    X(libssh2_sftp_shutdown) X(libssh2_sftp_last_error) X(libssh2_sftp_open_ex) X(libssh2_sftp_close_handle) \
    X(libssh2_sftp_readdir_ex) X(libssh2_sftp_read) X(libssh2_sftp_seek64) X(libssh2_sftp_stat_ex) \
    X(libssh2_sftp_fstat_ex) X(libssh2_sftp_symlink_ex)

FOLIO_DEFINE_LOADER(folio_ssh2_load, "libssh2.so.1", FOLIO_SSH2_FUNCTIONS)

int libssh2_init(int flags) { return loaded_libssh2_init(flags); }

LIBSSH2_SESSION *libssh2_session_init_ex(LIBSSH2_ALLOC_FUNC((*allocate)), LIBSSH2_FREE_FUNC((*release)),
                                         LIBSSH2_REALLOC_FUNC((*reallocate)), void *abstract) {
    return loaded_libssh2_session_init_ex(allocate, release, reallocate, abstract);
}
int libssh2_session_free(LIBSSH2_SESSION *session) { return loaded_libssh2_session_free(session); }
void libssh2_session_set_blocking(LIBSSH2_SESSION *session, int blocking) { loaded_libssh2_session_set_blocking(session, blocking); }
void libssh2_session_set_timeout(LIBSSH2_SESSION *session, long timeout) { loaded_libssh2_session_set_timeout(session, timeout); }
void *libssh2_session_callback_set(LIBSSH2_SESSION *session, int type, void *callback) {
    return loaded_libssh2_session_callback_set(session, type, callback);
}
int libssh2_session_handshake(LIBSSH2_SESSION *session, libssh2_socket_t socket) {
    return loaded_libssh2_session_handshake(session, socket);
}
const char *libssh2_session_hostkey(LIBSSH2_SESSION *session, size_t *length, int *type) {
    return loaded_libssh2_session_hostkey(session, length, type);
}
int libssh2_session_last_error(LIBSSH2_SESSION *session, char **message, int *length, int wantBuffer) {
    return loaded_libssh2_session_last_error(session, message, length, wantBuffer);
}
int libssh2_session_block_directions(LIBSSH2_SESSION *session) { return loaded_libssh2_session_block_directions(session); }
const char *libssh2_session_banner_get(LIBSSH2_SESSION *session) { return loaded_libssh2_session_banner_get(session); }
int libssh2_session_disconnect_ex(LIBSSH2_SESSION *session, int reason, const char *description, const char *language) {
    return loaded_libssh2_session_disconnect_ex(session, reason, description, language);
}
int libssh2_session_method_pref(LIBSSH2_SESSION *session, int methodType, const char *preferences) {
    return loaded_libssh2_session_method_pref(session, methodType, preferences);
}
const char *libssh2_hostkey_hash(LIBSSH2_SESSION *session, int type) { return loaded_libssh2_hostkey_hash(session, type); }
int libssh2_session_supported_algs(LIBSSH2_SESSION *session, int methodType, const char ***algorithms) {
    return loaded_libssh2_session_supported_algs(session, methodType, algorithms);
}
void libssh2_free(LIBSSH2_SESSION *session, void *pointer) { loaded_libssh2_free(session, pointer); }
const char *libssh2_version(int required) { return loaded_libssh2_version(required); }
void libssh2_keepalive_config(LIBSSH2_SESSION *session, int wantReply, unsigned interval) {
    loaded_libssh2_keepalive_config(session, wantReply, interval);
}
int libssh2_keepalive_send(LIBSSH2_SESSION *session, int *secondsToNext) { return loaded_libssh2_keepalive_send(session, secondsToNext); }

LIBSSH2_KNOWNHOSTS *libssh2_knownhost_init(LIBSSH2_SESSION *session) { return loaded_libssh2_knownhost_init(session); }
void libssh2_knownhost_free(LIBSSH2_KNOWNHOSTS *hosts) { loaded_libssh2_knownhost_free(hosts); }
int libssh2_knownhost_readline(LIBSSH2_KNOWNHOSTS *hosts, const char *line, size_t length, int type) {
    return loaded_libssh2_knownhost_readline(hosts, line, length, type);
}
int libssh2_knownhost_checkp(LIBSSH2_KNOWNHOSTS *hosts, const char *host, int port, const char *key, size_t keyLength,
                             int typemask, struct libssh2_knownhost **found) {
    return loaded_libssh2_knownhost_checkp(hosts, host, port, key, keyLength, typemask, found);
}

char *libssh2_userauth_list(LIBSSH2_SESSION *session, const char *user, unsigned int userLength) {
    return loaded_libssh2_userauth_list(session, user, userLength);
}
int libssh2_userauth_authenticated(LIBSSH2_SESSION *session) { return loaded_libssh2_userauth_authenticated(session); }
int libssh2_userauth_publickey_fromfile_ex(LIBSSH2_SESSION *session, const char *user, unsigned int userLength,
                                           const char *publicKey, const char *privateKey, const char *passphrase) {
    return loaded_libssh2_userauth_publickey_fromfile_ex(session, user, userLength, publicKey, privateKey, passphrase);
}
int libssh2_userauth_password_ex(LIBSSH2_SESSION *session, const char *user, unsigned int userLength, const char *password,
                                 unsigned int passwordLength, LIBSSH2_PASSWD_CHANGEREQ_FUNC((*changeRequest))) {
    return loaded_libssh2_userauth_password_ex(session, user, userLength, password, passwordLength, changeRequest);
}

int libssh2_userauth_keyboard_interactive_ex(LIBSSH2_SESSION *session, const char *user, unsigned int userLength,
                                             LIBSSH2_USERAUTH_KBDINT_RESPONSE_FUNC((*respond))) {
    return loaded_libssh2_userauth_keyboard_interactive_ex(session, user, userLength, respond);
}
void **libssh2_session_abstract(LIBSSH2_SESSION *session) { return loaded_libssh2_session_abstract(session); }

LIBSSH2_AGENT *libssh2_agent_init(LIBSSH2_SESSION *session) { return loaded_libssh2_agent_init(session); }
int libssh2_agent_connect(LIBSSH2_AGENT *agent) { return loaded_libssh2_agent_connect(agent); }
int libssh2_agent_list_identities(LIBSSH2_AGENT *agent) { return loaded_libssh2_agent_list_identities(agent); }
int libssh2_agent_get_identity(LIBSSH2_AGENT *agent, struct libssh2_agent_publickey **store,
                               struct libssh2_agent_publickey *previous) {
    return loaded_libssh2_agent_get_identity(agent, store, previous);
}
int libssh2_agent_userauth(LIBSSH2_AGENT *agent, const char *user, struct libssh2_agent_publickey *identity) {
    return loaded_libssh2_agent_userauth(agent, user, identity);
}
int libssh2_agent_disconnect(LIBSSH2_AGENT *agent) { return loaded_libssh2_agent_disconnect(agent); }
void libssh2_agent_free(LIBSSH2_AGENT *agent) { loaded_libssh2_agent_free(agent); }

LIBSSH2_CHANNEL *libssh2_channel_open_ex(LIBSSH2_SESSION *session, const char *type, unsigned int typeLength,
                                         unsigned int windowSize, unsigned int packetSize, const char *message,
                                         unsigned int messageLength) {
    return loaded_libssh2_channel_open_ex(session, type, typeLength, windowSize, packetSize, message, messageLength);
}
int libssh2_channel_process_startup(LIBSSH2_CHANNEL *channel, const char *request, unsigned int requestLength,
                                    const char *message, unsigned int messageLength) {
    return loaded_libssh2_channel_process_startup(channel, request, requestLength, message, messageLength);
}
ssize_t libssh2_channel_read_ex(LIBSSH2_CHANNEL *channel, int stream, char *buffer, size_t length) {
    return loaded_libssh2_channel_read_ex(channel, stream, buffer, length);
}
ssize_t libssh2_channel_write_ex(LIBSSH2_CHANNEL *channel, int stream, const char *buffer, size_t length) {
    return loaded_libssh2_channel_write_ex(channel, stream, buffer, length);
}
int libssh2_channel_handle_extended_data2(LIBSSH2_CHANNEL *channel, int mode) {
    return loaded_libssh2_channel_handle_extended_data2(channel, mode);
}
int libssh2_channel_send_eof(LIBSSH2_CHANNEL *channel) { return loaded_libssh2_channel_send_eof(channel); }
int libssh2_channel_close(LIBSSH2_CHANNEL *channel) { return loaded_libssh2_channel_close(channel); }
int libssh2_channel_wait_closed(LIBSSH2_CHANNEL *channel) { return loaded_libssh2_channel_wait_closed(channel); }
int libssh2_channel_get_exit_status(LIBSSH2_CHANNEL *channel) { return loaded_libssh2_channel_get_exit_status(channel); }
int libssh2_channel_get_exit_signal(LIBSSH2_CHANNEL *channel, char **name, size_t *nameLength, char **message, size_t *messageLength,
                                    char **language, size_t *languageLength) {
    return loaded_libssh2_channel_get_exit_signal(channel, name, nameLength, message, messageLength, language, languageLength);
}
int libssh2_channel_free(LIBSSH2_CHANNEL *channel) { return loaded_libssh2_channel_free(channel); }

LIBSSH2_SFTP *libssh2_sftp_init(LIBSSH2_SESSION *session) { return loaded_libssh2_sftp_init(session); }
int libssh2_sftp_shutdown(LIBSSH2_SFTP *sftp) { return loaded_libssh2_sftp_shutdown(sftp); }
unsigned long libssh2_sftp_last_error(LIBSSH2_SFTP *sftp) { return loaded_libssh2_sftp_last_error(sftp); }
LIBSSH2_SFTP_HANDLE *libssh2_sftp_open_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int pathLength, unsigned long flags,
                                          long mode, int openType) {
    return loaded_libssh2_sftp_open_ex(sftp, path, pathLength, flags, mode, openType);
}
int libssh2_sftp_close_handle(LIBSSH2_SFTP_HANDLE *handle) { return loaded_libssh2_sftp_close_handle(handle); }
int libssh2_sftp_readdir_ex(LIBSSH2_SFTP_HANDLE *handle, char *buffer, size_t length, char *longEntry,
                            size_t longEntryLength, LIBSSH2_SFTP_ATTRIBUTES *attributes) {
    return loaded_libssh2_sftp_readdir_ex(handle, buffer, length, longEntry, longEntryLength, attributes);
}
ssize_t libssh2_sftp_read(LIBSSH2_SFTP_HANDLE *handle, char *buffer, size_t length) {
    return loaded_libssh2_sftp_read(handle, buffer, length);
}
void libssh2_sftp_seek64(LIBSSH2_SFTP_HANDLE *handle, libssh2_uint64_t offset) { loaded_libssh2_sftp_seek64(handle, offset); }
int libssh2_sftp_stat_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int pathLength, int statType,
                         LIBSSH2_SFTP_ATTRIBUTES *attributes) {
    return loaded_libssh2_sftp_stat_ex(sftp, path, pathLength, statType, attributes);
}
int libssh2_sftp_fstat_ex(LIBSSH2_SFTP_HANDLE *handle, LIBSSH2_SFTP_ATTRIBUTES *attributes, int setStat) {
    return loaded_libssh2_sftp_fstat_ex(handle, attributes, setStat);
}
int libssh2_sftp_symlink_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int pathLength, char *target,
                            unsigned int targetLength, int linkType) {
    return loaded_libssh2_sftp_symlink_ex(sftp, path, pathLength, target, targetLength, linkType);
}

/* libssh2's own receive (recv, errors as -errno, EWOULDBLOCK as -EAGAIN), then an immediate ACK of what was read. */
static LIBSSH2_RECV_FUNC(folio_ssh2_recv) {
    (void)abstract;
    ssize_t received = recv(socket, buffer, length, flags);
    if (received < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    int one = 1;
    setsockopt(socket, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    return received;
}

void folio_ssh2_acknowledge_at_once(LIBSSH2_SESSION *session) {
    libssh2_session_callback_set(session, LIBSSH2_CALLBACK_RECV, (void *)folio_ssh2_recv);
}

/* The password a keyboard-interactive log-in answers with, once. */
struct folio_ssh2_password_answer {
    const char *password;
    unsigned int length;
    int given;
};

/* Answers the first prompt that hides what is typed ("Password:") with the password, and every other prompt, and
   every later round, with nothing. Why once: a server that asks again after a wrong password then refuses at
   once, instead of taking the same wrong password for each of its retries; a second hidden prompt (a one-time
   code) is not the password either. libssh2 frees the answers with the session's allocator, malloc's here. */
static void folio_ssh2_answer_prompts(const char *name, int nameLength, const char *instruction, int instructionLength,
                                      int promptCount, const LIBSSH2_USERAUTH_KBDINT_PROMPT *prompts,
                                      LIBSSH2_USERAUTH_KBDINT_RESPONSE *responses, void **abstract) {
    (void)name; (void)nameLength; (void)instruction; (void)instructionLength;
    struct folio_ssh2_password_answer *answer = *abstract;
    for (int index = 0; index < promptCount; index++) {
        int givesPassword = answer != NULL && !answer->given && !prompts[index].echo;
        unsigned int length = givesPassword ? answer->length : 0;
        responses[index].text = malloc(length + 1);
        responses[index].length = 0;
        if (responses[index].text == NULL) continue;
        if (givesPassword) {
            memcpy(responses[index].text, answer->password, length);
            answer->given = 1;
        }
        responses[index].text[length] = '\0';
        responses[index].length = length;
    }
}

int folio_ssh2_userauth_password_prompts(LIBSSH2_SESSION *session, const char *user, unsigned int userLength,
                                         const char *password, unsigned int passwordLength) {
    struct folio_ssh2_password_answer answer = { password, passwordLength, 0 };
    /* Why the session's abstract pointer: it is what libssh2 hands the callback, which may capture nothing. It is
       set only for this call, on the one thread that uses the session. */
    void **abstract = libssh2_session_abstract(session);
    void *saved = *abstract;
    *abstract = &answer;
    int result = libssh2_userauth_keyboard_interactive_ex(session, user, userLength, folio_ssh2_answer_prompts);
    *abstract = saved;
    return result;
}
