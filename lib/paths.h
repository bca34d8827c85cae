/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Where things live, shared by spacectl and spaced so both agree without talking. All return malloc'd
 * strings or -errno. */

/* $SPACE_SOCKET, else $XDG_RUNTIME_DIR/space/api.sock, else /run/user/$UID/space/api.sock when
 * /run/user/$UID exists, else /tmp/space-$UID/api.sock. */
int space_socket_path(char **ret);
/* The runtime directory holding the socket and per-sandbox run dirs (dirname of the socket path unless
 * $SPACE_RUNTIME_DIR is set). */
int space_runtime_dir(char **ret);
/* $SPACE_STATE_DIR, else $XDG_STATE_HOME/space, else $HOME/.local/state/space. */
int space_state_dir(char **ret);
/* $SPACE_CONFIG, else $XDG_CONFIG_HOME/space/spaced.conf, else $HOME/.config/space/spaced.conf. */
int space_config_path(char **ret);
/* $SPACE_CACHE_DIR, else $XDG_CACHE_HOME/space, else $HOME/.cache/space: what may be thrown away and made
 * again (guest/build-kernel.sh's debs, spaced's accelerator probe), shared by every state dir of the user. */
int space_cache_dir(char **ret);
/* $SPACE_LIB_DIR, else the compiled-in SPACE_PKGLIBDIR ($prefix/lib/space): vmlinux, initramfs.cpio,
 * templates/NAME/{rootfs.ext4,template.conf}. */
int space_lib_dir(char **ret);
/* Is path a directory only its owner, us, can enter (a neighbour on the machine can neither plant files nor
 * symlinks there)? 0, or -ELOOP (a symlink), -ENOTDIR, -EPERM (someone else owns it), -EACCES (group or others
 * have access: the mode must be 0700), or open()'s -errno. ret_st (may be NULL) gets its stat once known. */
struct stat;
int space_private_dir_check(const char *path, struct stat *ret_st);
/* mkdir -p with the given mode for the last component and 0755 for parents. */
int space_mkdir_p(const char *path, unsigned mode);
/* mkdir -p of path's parents (0755), not path itself; -ENAMETOOLONG past PATH_MAX. Async-signal-safe (the
 * jail uses it between fork and exec). */
int space_mkdir_parents(const char *path);
