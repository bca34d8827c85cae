/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The host <-> guest channel (ARCHITECTURE.md, decision 3).
 *
 * One virtio-serial port carries a byte stream of frames. Every frame is a fixed 12-byte header followed by
 * at most SPACE_FRAME_PAYLOAD_MAX bytes of payload:
 *
 *   le32 length   payload bytes that follow the header (0..SPACE_FRAME_PAYLOAD_MAX)
 *   le32 stream   0 = channel control; otherwise a stream id (see below)
 *   u8   type     enum space_frame_type
 *   u8   fd       0 stdin, 1 stdout, 2 stderr for DATA/EOF/CREDIT; 0 otherwise
 *   le16 reserved must be 0
 *
 * Stream ids: the host allocates ids 1..0x7fffffff for the streams it opens (EXEC, INIT, PING). Ids with the
 * top bit set are reserved for streams the guest opens (egress, later). A receiver that gets a frame it does
 * not expect drops the frame; the host treats a malformed header as a fatal channel error and disconnects.
 *
 * Control payloads (HELLO, INIT, EXEC, STARTED, ERROR, EXIT) are "key=value\0" records, concatenated, in
 * order; a key may repeat (argv, env). Values never contain NUL. Binary values (seeds) are hex.
 *
 * Flow control: each direction of each (stream, fd) starts with SPACE_STREAM_WINDOW bytes of credit at the
 * sender. The sender may send DATA only while it has credit, and subtracts the payload length. The receiver
 * returns credit with CREDIT frames (payload: le32 bytes) once it has passed the bytes on. A peer that sends
 * more than its credit is violating the protocol: the host kills that stream. The guest clamps credit it is
 * given at the window (space_credit_give_clamp) instead of refusing it, so a restarted host, which cannot know
 * how much credit a stream has left, can re-grant a full window.
 *
 * Conversation:
 *   guest -> host  HELLO (stream 0) as soon as the port is open, and again whenever it sees the host reconnect
 *                  (it cannot see that; so the host may send PING at any time and the guest answers PONG).
 *   host -> guest  PING(stream s, payload <= 64 bytes)           -> PONG(s, same payload)
 *   host -> guest  INIT(s, kv: hostname, sandbox_id, time_ns, seed, env...) -> OK(s) | ERROR(s, kv)
 *                  Every key is optional. service=SHELL-LINE[, service_user, service_cwd]: a command the agent
 *                  starts once (sh -c, as that user, in that directory, with the env) and starts again whenever
 *                  it exits; a later INIT naming the same command changes nothing, another one is ERROR(EBUSY).
 *                  ca=PEM (version 5): the daemon's CA certificate, which the guest trusts from then on
 *                  (/etc/space/ca.pem, the system bundle, SSL_CERT_FILE and the like for what the agent starts;
 *                  guest/agent/ca.c): written before the thaw unless that PEM is in place already; a failure
 *                  is ERROR(s, kv: errno, message "ca: ..."), sent with the rest of the INIT done. An INIT
 *                  without it changes none of that; an older agent ignores it. A certificate, never a key.
 *                  Every INIT the agent takes (no ERROR) thaws the workload, once its clock and seed are set.
 *   host -> guest  PING(s, "freeze") (version 4): the workload (every process the agent started) stops, for a
 *                  snapshot others restore from -> PONG(s, "frozen") once it stands still, or ERROR(s, kv: errno,
 *                  message) after at most 2 s (then it runs on). It stays frozen until the next INIT; EXEC and
 *                  RELEASE, and the frames of their streams after them, wait for that INIT. It rides on PING so
 *                  that an older agent echoes it (PONG(s, "freeze"): it froze nothing) where an unknown frame
 *                  type would be a malformed frame to it, which drops what it read with it.
 *   host -> guest  PING(s, "stop") (version 6): the host is about to shut the VM down and boot it again later
 *                  from its disk alone (a stop): the workload is frozen as for "freeze" (so that nothing writes
 *                  after the sync), then every filesystem is synced -> PONG(s, "synced") once sync() returned,
 *                  frozen or not (a freeze that failed only lets the workload write on until QEMU goes). An
 *                  older agent echoes "stop": it synced nothing.
 *   host -> guest  EXEC(s, kv: argv..., env..., cwd, user, stdin=0|1, pty=0|1, rows, cols, hold=0|1)
 *                  -> STARTED(s, kv: pid) | ERROR(s, kv: errno, message, stage=chdir|exec|setup|user, code)
 *                  (errno=2, stage=exec: no such command). With hold=1 the child is forked and waits before
 *                  chdir and exec: STARTED comes at once (held=1), and exec failures come as ERROR after
 *                  RELEASE.
 *                  user=NAME|UID[:GROUP|GID] (lib/user.h; absent: root) is resolved in the guest's /etc/passwd
 *                  and /etc/group before the fork: an unknown one is ERROR(code=unknown_user|unknown_group|
 *                  invalid_user, stage=user) at once, held or not. The child sets its supplementary groups, gid
 *                  and uid, makes its stdio pipes and pty the user's, and gets HOME, USER, LOGNAME (EXEC's env
 *                  records still win). Without cwd it starts in the user's home ("/" when that is missing or
 *                  cannot be entered), and STARTED says where: cwd=PATH.
 *   host -> guest  RELEASE(s): a held child goes on to exec.
 *   host -> guest  ADOPT(s) (a restarted host taking over a stream it finds in its records)
 *                  -> STARTED(s, kv: pid, held=0|1) while the process runs (or is held), or EXIT(s, ...) again
 *                  if it has exited, or ERROR(s, kv: errno=3) if the agent does not know the stream.
 *                  The host then grants a full window with CREDIT; a receiver clamps credit at the window.
 *   guest -> host  DATA(s, fd 1|2, bytes) ... EOF(s, fd 1), EOF(s, fd 2), then EXIT(s, kv: code | signal)
 *   host -> guest  DATA(s, fd 0), EOF(s, fd 0) (close stdin), SIGNAL(s, le32 signo), RESIZE(s, le16 rows,
 *                  le16 cols), CREDIT(s, fd 1|2, le32 bytes), CLOSE(s) to forget a stream after EXIT.
 *   guest -> host  CREDIT(s, fd 0, le32 bytes) as stdin bytes are written to the process.
 *
 * File operations (FILE) run on a stream of their own; the guest agent is root and paths are absolute:
 *   host -> guest  FILE(s, kv: op=stat|list|mkdir|remove|move|symlink|attrs|read|write, path, ...)
 *                  -> OK(s, kv: entry) | ERROR(s, kv: errno, message[, code=too_many_entries|unknown_user|unknown_group])
 *                  stat    follow=0|1                               -> OK(entry of path)
 *                  mkdir   mode, parents=0|1, uid, gid               -> OK(entry); EEXIST without parents
 *                          exclusive=1: EEXIST with parents too, when the directory itself exists
 *                  remove  recursive=0|1                             -> OK()
 *                  move    to (path is the source)                   -> OK(entry of to)
 *                  symlink target, uid, gid                          -> OK(entry)
 *                  attrs   mode, mtime, uid, gid (no symlink follow) -> OK(entry)
 *                  list    depth=1..64                               -> OK(count=N), DATA(s, fd 1, entries)...,
 *                                                                     EOF(s, fd 1)
 *                  read                                              -> OK(entry), DATA(s, fd 1, bytes)...,
 *                                                                     EOF(s, fd 1) | ERROR
 *                  write   mode, mtime, uid, gid, parents=0|1        -> OK(ready); then the host sends
 *                          DATA(s, fd 0, bytes)... EOF(s, fd 0)      -> OK(entry) | ERROR
 *                          meta_key=KEY, meta_value=VALUE (version 6; pairs, in that order): the file's metadata,
 *                          set as user.e2b.KEY attributes on the temporary file before its rename, so the file
 *                          appears with exactly these (a replaced file's go with it; none: it has none). Keys
 *                          1..SPACE_FILE_META_KEY_MAX bytes, all of it within SPACE_FILE_META_BYTES_MAX (E2B's
 *                          envd's limits; the host checks its clients' against envd's rules first), else EINVAL.
 *                          An older agent ignores them and its answer's entry has none: what the client is told
 *                          is what the file has, as envd's answer on a file system without attributes.
 *                  Any op may carry user=NAME|UID (as EXEC's, no :GROUP needed): the agent resolves it in the
 *                  guest's /etc/passwd ("unknown user ..." ERROR otherwise) and acts with that user's
 *                  filesystem identity and groups (setfsuid/setfsgid), so permissions are the user's and what it
 *                  creates is owned by it (a replaced file too); without user= it acts as root. mkdir, symlink,
 *                  write and attrs may carry chown=NAME|UID[:GROUP|GID] instead of uid/gid (and not with user=):
 *                  resolved the same way, it owns what the op creates (each directory mkdir/parents makes) and
 *                  a replaced file; with chown_if=writable only what it creates, and only in a directory that
 *                  user could write by its mode bits, or in / (new top-level directories). names=1: single
 *                  entries also carry owner=NAME, group=NAME, and a list's OK carries uname=UID:NAME and
 *                  gname=GID:NAME for the ids its entries have, when the guest's passwd/group name them.
 *                  DATA on fd 1 and fd 0 run under the same per-(stream, fd) credit as process stdio. A write goes
 *                  to a temporary file in the target's directory, renamed into place at EOF; CLOSE(s) from the
 *                  host (or the host going away) drops it. The stream is forgotten after its last OK or ERROR.
 *                  watch   recursive=0|1, entry=0|1, network=0|1 (version 6)
 *                                                                    -> OK() once inotify is armed on path (and,
 *                          recursive, on every directory below it), then DATA(s, fd 1, events)... under credit
 *                          until the host sends CLOSE(s), or ERROR(s, kv: errno, message, code) which ends it:
 *                          code=too_many_watches (more than SPACE_WATCH_DIRS_MAX directories in one watch, or
 *                          than SPACE_WATCH_DIRS_AGENT_MAX in the agent, or SPACE_WATCHES_MAX watches, or a
 *                          directory whose path is too long to watch),
 *                          code=overflow (the kernel's queue overflowed, or SPACE_WATCH_BACKLOG_MAX bytes of
 *                          events waited for credit), code=invalid (a network file system without network=1).
 *                          An event is ev=create|write|remove|rename|chmod, name=REL (the path below the watched
 *                          directory, "." for the directory itself), and with entry=1, for create, write and
 *                          chmod, the entry records that follow (when its lstat still succeeds). A DATA frame
 *                          carries whole events only. A new directory in a recursive watch is watched as it
 *                          appears, and what it already holds is reported as created.
 *   entry: kv records type=file|dir|symlink|other, mode (permission bits, decimal), size, mtime (unix
 *          seconds), mtime_nsec (0..999999999; optional, an older agent leaves it out), uid, gid, target
 *          (symlinks: the link's text). In a list, each entry starts with rel=NAME[/NAME...], the
 *          path below the listed directory; a DATA frame carries whole entries only.
 *          Version 6 adds, for a symlink: resolved=PATH (realpath as the request's user: absolute, every link
 *          on the way followed; "" when that fails: dangling, a loop, no right), and target_type= and
 *          target_mode= of what it leads to when that can be seen; and for any entry meta_key=KEY,
 *          meta_value=VALUE pairs: its user.e2b.* attributes (a symlink's: its target's, as envd reads them),
 *          only those whose key and value are UTF-8 without NUL, keys 1..SPACE_FILE_META_KEY_MAX bytes, the
 *          first of them (in listxattr order) within SPACE_FILE_META_BYTES_MAX; the rest is left out. Other
 *          attributes never leave the guest. The host refuses an entry beyond those bounds as malformed.
 *          guest/agent/entry.c writes every entry (FILE answers and watch events alike).
 *
 * Volume mounts (version 7; ARCHITECTURE.md, "Volumes"): a volume is mounted in the guest as a FUSE file system
 * that the agent serves (guest/agent/volume*.c) by asking the host, path by path. The host keeps no state per
 * file or per node: the agent maps the kernel's node ids to paths in guest memory, so a snapshot, a restore or a
 * fork keeps the mount as it is, and a restarted host answers the next request as the old one would have.
 *   host -> guest  INIT(s, kv: ..., mount_volume=ID, mount_path=PATH, ...) (pairs, in that order): the agent
 *                  mounts volume ID at PATH (absolute; made with its parents, root's 0755, if missing) before it
 *                  answers, so that the workload the INIT thaws sees it. A mount of ID at PATH that is there
 *                  already is kept as it is (a fork's or a restore's INIT names the mounts the guest has); one
 *                  that fails is ERROR(s, kv: errno, message "mount PATH: ...") with the rest of the INIT done.
 *                  An INIT with mount records is answered OK(s, kv: mounts=N), N the mounts it named, all in
 *                  place: the host tells an agent that ignored them by the missing record.
 *                  An older agent ignores the records: the host sends them only to an agent of version >= 7.
 *   guest -> host  VOLUME(s | GUEST_BIT, payload) -> VOLUME(s, payload) | ERROR(s, kv: errno, message)
 *                  payload: le32 n, then n bytes of kv records, then raw bytes (a write's, a read's answer).
 *                  The request's records: volume=ID (one the host mounted in this guest, else EACCES),
 *                  op=NAME, path=REL (the path in the volume: "" for its root, else names joined by '/', none
 *                  empty, "." or "..", each at most SPACE_FILE_NAME_MAX bytes, all at most SPACE_FILE_PATH_MAX),
 *                  and the op's:
 *                    lookup, getattr                                  -> attr
 *                    setattr  [mode] [uid] [gid] [size] [atime, atime_nsec | atime=now] [mtime... likewise]
 *                                                                     -> attr
 *                    readdir  cookie (0 at the start)                 -> (name, type, ino)... then cookie=NEXT
 *                             (0 at the end); as many as fit in a frame, "." and ".." left out
 *                    read     offset, size (<= SPACE_VOLUME_IO_MAX)   -> no records, the bytes (fewer at EOF)
 *                    write    offset, the bytes (<= SPACE_VOLUME_IO_MAX) -> written=N, then attr
 *                    create   mode, uid, gid, exclusive=0|1           -> attr (an existing file is opened as
 *                             is without exclusive)
 *                    mkdir    mode, uid, gid                          -> attr
 *                    symlink  target, uid, gid                        -> attr
 *                    readlink                                         -> target=TEXT
 *                    unlink, rmdir                                    -> no records
 *                    rename   to=REL, noreplace=0|1                   -> no records
 *                    statfs                                           -> bsize, blocks, bfree, files, ffree
 *                    fsync                                            -> no records
 *                  attr: type=file|dir|symlink|other, mode (permission bits, octal 07777 at most, decimal),
 *                  size, uid, gid, ino, nlink, atime, atime_nsec, mtime, mtime_nsec, ctime, ctime_nsec. The mode,
 *                  uid and gid are the ones set through the volume (VOLUME_XATTR_* on the host), not the host
 *                  file's. errno is the guest's to return to its caller (ENOSPC when the volume's quota of bytes
 *                  or its bound on entries would be passed, ENOENT, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, EINVAL,
 *                  EACCES, EIO). statfs's blocks are the quota's, files and ffree the bound on entries'.
 *                  At most SPACE_VOLUME_OPS_MAX requests are in flight per channel (the agent stops reading
 *                  /dev/fuse until an answer comes); the host answers more with ERROR(errno=EBUSY). When the host
 *                  reconnects, the agent sends the requests it has no answer to again, on new streams.
 *
 * Tunnels (version 3) carry TCP connections over the channel, both ways (ARCHITECTURE.md, decision 10). Bytes
 * from the host to the guest are always DATA(s, fd 0), bytes from the guest to the host DATA(s, fd 1), each
 * direction under the usual credit (the receiver returns CREDIT(s, same fd) as it passes bytes on), starting at
 * SPACE_STREAM_WINDOW when the stream opens. EOF(s, fd) is a half close of that direction (shutdown(SHUT_WR)
 * at the far end). CLOSE(s), from either side, aborts: the receiver resets its socket and forgets the stream.
 * Without CLOSE a side forgets a tunnel once it has sent and received EOF and sent all its data.
 *   guest -> host  CONNECT(s | GUEST_BIT, kv: host=NAME|ADDRESS, port=1..65535, via=proxy|transparent)
 *                  An outbound connection a program in the guest made: through the agent's proxy (via=proxy;
 *                  host is the name or literal the program asked for) or captured (via=transparent; host is
 *                  the original destination address). The guest may send DATA at once, within its window:
 *                  the host holds the first bytes to read the TLS SNI or HTTP Host before it decides.
 *                  -> OK(s, kv: addr=ADDRESS) once the host is connected to addr (a proxy answers its client
 *                     only now), or ERROR(s, kv: code=denied|unreachable|invalid|busy|timeout, message) after
 *                     which the stream is forgotten. The host may CLOSE an open tunnel at any time (the
 *                     first bytes named a host the policy denies).
 *                  At most SPACE_TUNNELS_MAX tunnels are open per channel; more are refused with code=busy.
 *   guest -> host  RESOLVE(s | GUEST_BIT, kv: name=NAME, family=4|6)   the guest's DNS stub asks
 *                  -> OK(s, kv: addr=ADDRESS... (at most SPACE_RESOLVE_ADDRS_MAX), ttl=SECONDS)
 *                   | ERROR(s, kv: code=nxdomain|denied|invalid, message); the stream is then forgotten.
 *                  Only names the policy allows resolve; the answers are the host's own resolution.
 *   host -> guest  PORT(s, kv: port=1..65535)   an inbound connection to 127.0.0.1:port (else [::1]:port)
 *                  in the guest -> OK(s) once connected | ERROR(s, kv: errno, message); then a tunnel.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPACE_PROTO_VERSION 7 /* 2: FILE; 3: CONNECT, RESOLVE, PORT; 4: PING "freeze"; 5: INIT ca;
                               * 6: FILE metadata, resolved symlink target, watch; PING "stop";
                               * 7: INIT mount_volume/mount_path, VOLUME */
#define SPACE_FRAME_HEADER_SIZE 12
#define SPACE_FRAME_PAYLOAD_MAX (64U * 1024U)
#define SPACE_FRAME_MAX (SPACE_FRAME_HEADER_SIZE + SPACE_FRAME_PAYLOAD_MAX)
#define SPACE_STREAM_WINDOW (256U * 1024U)
#define SPACE_PING_PAYLOAD_MAX 64U
/* PING's payload that asks for the workload to be frozen, and PONG's that says it is (see above). */
#define SPACE_PING_FREEZE "freeze"
#define SPACE_PONG_FROZEN "frozen"
/* PING's payload before the host shuts the VM down for good (a stop), and PONG's that says it is done. */
#define SPACE_PING_STOP "stop"
#define SPACE_PONG_SYNCED "synced"
#define SPACE_STREAM_GUEST_BIT 0x80000000U
/* Hard caps the host enforces on what the guest may make it hold. */
#define SPACE_KV_RECORDS_MAX 4096U
#define SPACE_STREAMS_MAX 1024U
/* File operations (FILE): limits both sides keep. */
#define SPACE_FILE_PATH_MAX 4096U            /* bytes of a path or a symlink target, without the NUL */
#define SPACE_FILE_NAME_MAX 255U             /* bytes of one path component */
#define SPACE_FILE_LIST_MAX 100000U          /* entries one list returns, else code=too_many_entries */
#define SPACE_FILE_LIST_BYTES_MAX (16U * 1024U * 1024U) /* encoded entries one list returns */
#define SPACE_FILE_LIST_DEPTH_MAX 64U
/* A file's metadata (version 6): user.e2b.KEY extended attributes, bounded as E2B's envd bounds them. */
#define SPACE_FILE_META_PREFIX "user.e2b."
#define SPACE_FILE_META_KEY_MAX 246U         /* bytes of a key: the VFS's 255 for a name, less the prefix */
#define SPACE_FILE_META_BYTES_MAX 4096U      /* of all of a file's: prefix + key + value, summed */
#define SPACE_FILE_XFERS_MAX 64U             /* file operations in flight per channel */
/* FILE watch (version 6) */
#define SPACE_WATCH_DIRS_MAX 4096U           /* directories one watch arms inotify on */
#define SPACE_WATCH_DIRS_AGENT_MAX 16384U    /* ... all the agent's watches together */
#define SPACE_WATCHES_MAX 32U                /* watches per agent */
#define SPACE_WATCH_BACKLOG_MAX (1024U * 1024U) /* encoded events one watch holds that wait for credit */
/* Volume mounts (version 7) */
#define SPACE_VOLUME_IO_MAX (32U * 1024U)    /* bytes one read or write moves (the mount's max_read, max_write) */
#define SPACE_VOLUME_OPS_MAX 64U             /* VOLUME requests in flight per channel */
#define SPACE_VOLUME_MOUNTS_MAX 16U          /* volumes mounted in one guest */
/* Tunnels (CONNECT, PORT) and RESOLVE */
#define SPACE_TUNNELS_MAX 256U               /* open tunnels per channel */
#define SPACE_RESOLVE_ADDRS_MAX 16U          /* addresses in one RESOLVE answer */
#define SPACE_RESOLVES_MAX 64U               /* RESOLVE questions in flight per channel */

/* The code=NAME of an ERROR frame: what the agent tells the host of an EXEC's user or a FILE list, and what
 * the host tells the agent of a CONNECT or a RESOLVE (the conversation above). The names are the wire's. */
typedef enum SpaceCode {
        SPACE_CODE_UNKNOWN_USER,     /* EXEC, stage=user */
        SPACE_CODE_UNKNOWN_GROUP,
        SPACE_CODE_INVALID_USER,
        SPACE_CODE_EXEC_FAILED,
        SPACE_CODE_TOO_MANY_ENTRIES, /* FILE list */
        SPACE_CODE_DENIED,           /* CONNECT, RESOLVE */
        SPACE_CODE_UNREACHABLE,
        SPACE_CODE_INVALID,
        SPACE_CODE_BUSY,
        SPACE_CODE_TIMEOUT,
        SPACE_CODE_NXDOMAIN,
        SPACE_CODE_TOO_MANY_WATCHES, /* FILE watch */
        SPACE_CODE_OVERFLOW,
        _SPACE_CODE_MAX,
} SpaceCode;

enum space_frame_type {
        SPACE_F_HELLO = 1,
        SPACE_F_PING = 2,
        SPACE_F_PONG = 3,
        SPACE_F_INIT = 4,
        SPACE_F_OK = 5,
        SPACE_F_ERROR = 6,
        SPACE_F_EXEC = 7,
        SPACE_F_STARTED = 8,
        SPACE_F_DATA = 9,
        SPACE_F_EOF = 10,
        SPACE_F_CREDIT = 11,
        SPACE_F_SIGNAL = 12,
        SPACE_F_RESIZE = 13,
        SPACE_F_EXIT = 14,
        SPACE_F_CLOSE = 15,
        SPACE_F_RELEASE = 16,
        SPACE_F_ADOPT = 17,
        SPACE_F_FILE = 18,
        SPACE_F_CONNECT = 19,
        SPACE_F_RESOLVE = 20,
        SPACE_F_PORT = 21,
        SPACE_F_VOLUME = 22,
        _SPACE_F_MAX,
};

typedef struct SpaceFrameHeader {
        uint32_t length;
        uint32_t stream;
        uint8_t type;
        uint8_t fd;
} SpaceFrameHeader;

/* Writes the 12-byte header. Returns -EINVAL if length > SPACE_FRAME_PAYLOAD_MAX, type or fd out of range. */
int space_frame_header_pack(const SpaceFrameHeader *h, uint8_t out[static SPACE_FRAME_HEADER_SIZE]);

/* Validates and decodes a header: -EBADMSG on an unknown type, fd > 2, non-zero reserved bits or a length
 * over SPACE_FRAME_PAYLOAD_MAX. */
int space_frame_header_unpack(const uint8_t in[static SPACE_FRAME_HEADER_SIZE], SpaceFrameHeader *ret);

/* Incremental reader: feed it whatever read() returned; it hands back whole frames. Never allocates beyond its
 * fixed buffer. */
typedef struct SpaceFrameReader {
        uint8_t buf[SPACE_FRAME_MAX];
        size_t have;
} SpaceFrameReader;

/* Copies as much of data[0..n) as fits into the reader and reports how much it took in *ret_consumed.
 * Returns 1 and fills *ret_header / *ret_payload (pointing into the reader, valid until the next call) when a
 * whole frame is ready; 0 when more bytes are needed; -EBADMSG when the header is malformed (the channel is
 * then unusable). Call again with the remaining bytes after a frame was returned. */
int space_frame_reader_feed(SpaceFrameReader *r, const uint8_t *data, size_t n, size_t *ret_consumed,
                            SpaceFrameHeader *ret_header, const uint8_t **ret_payload);

/* Growable output buffer for building payloads and queueing frames. */
typedef struct SpaceBuf {
        uint8_t *data;
        size_t len;
        size_t cap;
} SpaceBuf;

void space_buf_done(SpaceBuf *b);
int space_buf_append(SpaceBuf *b, const void *p, size_t n);
/* Drops the first n bytes (after a partial write). */
void space_buf_consume(SpaceBuf *b, size_t n);

/* Appends a whole frame (header + payload) to b. -EINVAL if n > SPACE_FRAME_PAYLOAD_MAX. */
int space_frame_append(SpaceBuf *b, uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n);

/* key=value\0 records. space_kv_add fails with -EINVAL if key is empty or contains '=' or NUL, or value
 * contains NUL (checked by strlen, so only embedded NULs in callers' buffers matter). */
int space_kv_add(SpaceBuf *b, const char *key, const char *value);
int space_kv_addf(SpaceBuf *b, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Iterates records: *offset starts at 0. Returns 1 with key/value (NUL-terminated, pointing into p) set, 0 at
 * the end, -EBADMSG if a record is not NUL-terminated within n, has no '=' or an empty key, or more than
 * SPACE_KV_RECORDS_MAX records were seen. key is returned as a pointer + length (not terminated at '='). */
int space_kv_next(const uint8_t *p, size_t n, size_t *offset, const char **ret_key, size_t *ret_key_len,
                  const char **ret_value);

/* A record's value as a number: decimal digits only (no sign, space or "0x", which strtoull() would take), at
 * most max; -EBADMSG for anything else. The one parser of numbers on the wire, both ways. */
int space_kv_parse_u64(const char *s, uint64_t max, uint64_t *ret);

/* Finds the first record with this key; returns 1 and *ret_value, 0 if absent, -EBADMSG as above. */
int space_kv_get(const uint8_t *p, size_t n, const char *key, const char **ret_value);

/* VOLUME payloads (version 7): le32 n, n bytes of kv records, then raw bytes. split points into p (-EBADMSG when n
 * says more than there is); build appends one to b (-EMSGSIZE past SPACE_FRAME_PAYLOAD_MAX; kv may be NULL). */
int space_volume_payload_split(const uint8_t *p, size_t n, const uint8_t **ret_kv, size_t *ret_kv_len,
                               const uint8_t **ret_data, size_t *ret_data_len);
int space_volume_payload_build(SpaceBuf *b, const SpaceBuf *kv, const void *data, size_t data_len);

/* Little-endian helpers for the fixed payloads (CREDIT, SIGNAL, RESIZE). */
static inline void space_put_le32(uint8_t *p, uint32_t v) {
        p[0] = v & 0xff;
        p[1] = (v >> 8) & 0xff;
        p[2] = (v >> 16) & 0xff;
        p[3] = (v >> 24) & 0xff;
}
static inline uint32_t space_get_le32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}
static inline void space_put_le16(uint8_t *p, uint16_t v) {
        p[0] = v & 0xff;
        p[1] = (v >> 8) & 0xff;
}
static inline uint16_t space_get_le16(const uint8_t *p) {
        return (uint16_t) (p[0] | p[1] << 8);
}

/* Per-direction credit accounting. */
typedef struct SpaceCredit {
        uint64_t available;
} SpaceCredit;

static inline void space_credit_init(SpaceCredit *c) {
        c->available = SPACE_STREAM_WINDOW;
}
/* Takes n bytes of credit; -ENOBUFS if there is not enough (the peer overran its window). */
int space_credit_take(SpaceCredit *c, size_t n);
/* Returns n bytes of credit; -EOVERFLOW if that would exceed the window (a lying peer). */
int space_credit_give(SpaceCredit *c, uint32_t n);
/* Returns n bytes of credit, never beyond the window: for a receiver of re-granted windows (see above). */
void space_credit_give_clamp(SpaceCredit *c, uint32_t n);

const char *space_frame_type_to_string(uint8_t type);
const char *space_code_to_string(SpaceCode c);
/* -EINVAL for NULL or a name that is no code (a newer peer's). */
int space_code_from_string(const char *s, SpaceCode *ret);
/* The code=NAME record of an ERROR payload, parsed once: 1 and *ret when it names a code, 0 when there is none
 * or it names none of ours (a newer or a hostile peer's: the caller's safe default applies), -EBADMSG as
 * space_kv_get(). Reads no further than n and compares only the names of the table, so any value is safe. */
int space_kv_get_code(const uint8_t *p, size_t n, SpaceCode *ret);
