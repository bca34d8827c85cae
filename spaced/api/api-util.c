/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"
#include "api/api.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "core/util.h"
#include "sandbox/sandbox.h"
#include "volume/volume.h"

/* JSON views of the model and the request parsing every handler shares. */

cJSON *sandbox_to_json(Sandbox *s) {
        cJSON *o = cJSON_CreateObject(), *env = cJSON_CreateObject();
        char when[32];

        cJSON_AddStringToObject(o, "id", s->id);
        if (s->name)
                cJSON_AddStringToObject(o, "name", s->name);
        else
                cJSON_AddNullToObject(o, "name");
        cJSON_AddStringToObject(o, "template", s->template_name);
        cJSON_AddStringToObject(o, "template_digest", s->template_digest ?: "");
        cJSON_AddStringToObject(o, "state", sandbox_state_to_string(s->state));
        cJSON_AddNumberToObject(o, "vcpu", s->vcpu);
        cJSON_AddNumberToObject(o, "memory_mib", (double) s->memory_mib);
        cJSON_AddNumberToObject(o, "disk_mib", (double) s->disk_mib);
        for (char **e = s->env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *k = eq ? strndup(*e, (size_t) (eq - *e)) : NULL;
                if (k)
                        cJSON_AddStringToObject(env, k, eq + 1);
        }
        cJSON_AddItemToObject(o, "env", env);
        cJSON_AddItemToObject(o, "metadata", sandbox_metadata_to_json(s));
        format_rfc3339(s->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        cJSON_AddNumberToObject(o, "qemu_pid", s->qemu_pid);
        cJSON_AddStringToObject(o, "accel", s->manager->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
        if (s->confined == SANDBOX_CONFINED_UNKNOWN)
                cJSON_AddNullToObject(o, "confined");
        else
                cJSON_AddBoolToObject(o, "confined", s->confined == SANDBOX_CONFINED_YES);
        if (s->confined == SANDBOX_CONFINED_NO && s->unconfined_reason)
                cJSON_AddStringToObject(o, "unconfined_reason", s->unconfined_reason);
        else
                cJSON_AddNullToObject(o, "unconfined_reason");
        cJSON_AddNumberToObject(o, "idle_timeout", (double) s->idle_timeout);
        if (s->expires_at > 0) {
                format_rfc3339(s->expires_at, when);
                cJSON_AddStringToObject(o, "expires_at", when);
        } else
                cJSON_AddNullToObject(o, "expires_at");
        cJSON_AddStringToObject(o, "on_timeout", s->on_expiry == EXPIRY_SUSPEND ? "suspend" :
                                                 s->on_expiry == EXPIRY_STOP ? "stop" : "remove");
        sandbox_egress_to_json(s->egress_profiles, s->egress_allow, s->egress_deny, o);
        cJSON_AddItemToObject(o, "volume_mounts", sandbox_mounts_to_json(s->manager, s->mounts, true));
        if (s->error)
                cJSON_AddStringToObject(o, "error", s->error);
        else
                cJSON_AddNullToObject(o, "error");
        /* a stopped sandbox was stopped by its user (spacectl stop) or its QEMU died (error says how) */
        if (s->state == SANDBOX_STOPPED)
                cJSON_AddStringToObject(o, "stopped_by", s->error ? "failure" : "user");
        else
                cJSON_AddNullToObject(o, "stopped_by");
        return o;
}

cJSON *operation_to_json(Operation *op) {
        cJSON *o = cJSON_CreateObject();
        char when[32];

        cJSON_AddStringToObject(o, "id", op->id);
        cJSON_AddStringToObject(o, "kind", op->kind);
        cJSON_AddStringToObject(o, "state", operation_state_to_string(op->state));
        if (op->sandbox_id[0])
                cJSON_AddStringToObject(o, "sandbox_id", op->sandbox_id);
        else
                cJSON_AddNullToObject(o, "sandbox_id");
        format_rfc3339(op->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        if (op->finished_at) {
                format_rfc3339(op->finished_at, when);
                cJSON_AddStringToObject(o, "finished_at", when);
        } else
                cJSON_AddNullToObject(o, "finished_at");
        if (op->checkpoint_id[0])
                cJSON_AddStringToObject(o, "checkpoint_id", op->checkpoint_id);
        if (op->children)
                cJSON_AddItemToObject(o, "sandbox_ids", json_array_from_strv(op->children));
        if (op->progress) {
                cJSON *p = cJSON_AddObjectToObject(o, "progress");
                pthread_mutex_lock(&op->progress->lock);
                cJSON_AddStringToObject(p, "phase", op->progress->phase ?: "running");
                cJSON_AddNumberToObject(p, "bytes_done", (double) op->progress->bytes_done);
                cJSON_AddNumberToObject(p, "bytes_total", (double) op->progress->bytes_total);
                cJSON_AddNumberToObject(p, "layer", op->progress->layer);
                cJSON_AddNumberToObject(p, "layers", op->progress->layers);
                pthread_mutex_unlock(&op->progress->lock);
        }
        if (op->from_pool != FROM_POOL_UNKNOWN)
                cJSON_AddBoolToObject(o, "from_pool", op->from_pool == FROM_POOL_YES);
        if (op->result) {
                cJSON *res = cJSON_Parse(op->result);
                if (res)
                        cJSON_AddItemToObject(o, "result", res);
        }
        if (op->error.code != ERROR_NONE) {
                cJSON *e = cJSON_AddObjectToObject(o, "error");
                cJSON_AddStringToObject(e, "code", error_code_to_string(op->error.code));
                cJSON_AddStringToObject(e, "message", error_message(&op->error));
        } else
                cJSON_AddNullToObject(o, "error");
        return o;
}

void respond_operation_error(Request *r, const Error *e, int err) {
        if (e->code != ERROR_NONE)
                http_respond_error(r, e->code, "%s", error_message(e));
        else
                http_respond_error(r, ERROR_INTERNAL, "%s", strerror(err < 0 ? -err : EIO));
}

void respond_error_or(Request *r, const Error *e, const char *fallback) {
        if (e->code != ERROR_NONE)
                http_respond_error(r, e->code, "%s", error_message(e));
        else
                http_respond_error(r, ERROR_INTERNAL, "%s", fallback);
}

static void resume_request(void *userdata) {
        http_resume(userdata);
}

ChannelWaiter api_request_waiter(Request *r) {
        return (ChannelWaiter) { .wake = resume_request, .userdata = r };
}

ssize_t api_stream_result(ssize_t n) {
        if (n == CHANNEL_READ_END)
                return HTTP_STREAM_END;
        if (n == CHANNEL_READ_ERROR)
                return HTTP_STREAM_ERROR;
        return n;
}

int parse_wait(Request *r, unsigned *ret) {
        const char *v = http_query(r, "wait");
        char *end;
        double d;

        *ret = 0;
        if (!v)
                return 0;
        errno = 0;
        d = strtod(v, &end);
        if (errno || end == v || *end || !(d >= 0) || d > WAIT_MAX_SEC) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "wait=%s: expected seconds from 0 to %d", v, WAIT_MAX_SEC);
                return -EINVAL;
        }
        *ret = (unsigned) ceil(d);
        return 0;
}

void api_add_time(cJSON *o, const char *key, int64_t t) {
        char when[32];

        format_rfc3339(t, when);
        cJSON_AddStringToObject(o, key, when);
}

static cJSON *parse_body(Request *r, const char *const *allowed, bool quote) {
        const char *end = NULL;
        cJSON *o, *i;

        if (r->body.len == 0)
                return cJSON_CreateObject();
        o = cJSON_ParseWithLengthOpts((const char *) r->body.data, r->body.len, &end, false);
        if (!o && !quote) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "the request body is not valid JSON");
                return NULL;
        }
        if (!o) {
                /* name where it broke: cJSON points at (or just past) the offending byte */
                size_t at = end && end >= (const char *) r->body.data
                                    ? (size_t) (end - (const char *) r->body.data) : 0;
                if (at > r->body.len)
                        at = r->body.len;
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "the request body is not valid JSON: syntax error at byte %zu of %zu%s%.*s%s", at,
                                   r->body.len, at < r->body.len ? " near '" : "",
                                   at < r->body.len ? (int) (r->body.len - at < 16 ? r->body.len - at : 16) : 0,
                                   (const char *) r->body.data + at, at < r->body.len ? "'" : "");
                return NULL;
        }
        if (!cJSON_IsObject(o)) {
                cJSON_Delete(o);
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "the request body must be a JSON object ({...})");
                return NULL;
        }
        cJSON_ArrayForEach(i, o) {
                bool ok = false;
                for (const char *const *a = allowed; *a; a++)
                        if (i->string && streq(i->string, *a))
                                ok = true;
                if (!ok) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "unknown field '%.64s'", i->string ?: "?");
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

cJSON *parse_body_object(Request *r, const char *const *allowed) {
        return parse_body(r, allowed, true);
}

cJSON *parse_secret_body(Request *r, const char *const *allowed) {
        cJSON *o = parse_body(r, allowed, false);

        explicit_bzero(r->body.data, r->body.len);
        return o;
}

void secret_body_free(cJSON *o) {
        cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, "value") : NULL;

        if (cJSON_IsString(v))
                explicit_bzero(v->valuestring, strlen(v->valuestring));
        cJSON_Delete(o);
}

int get_uint_field(Request *r, cJSON *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double) min ||
            v->valuedouble > (double) max) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s must be a whole number from %llu to %llu", key,
                                   (unsigned long long) min, (unsigned long long) max);
                return -EINVAL;
        }
        *ret = (uint64_t) v->valuedouble;
        return 1;
}

static bool env_key_valid(const char *k) {
        if (!*k || strchr(k, '='))
                return false;
        return true;
}

int get_env_field(Request *r, cJSON *o, char ***ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "env"), *i;
        char **env;
        size_t n = 0;

        *ret = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        if ((!cJSON_IsObject(v) && !cJSON_IsArray(v)) || cJSON_GetArraySize(v) > SANDBOX_ENV_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "env must be an object of strings (at most %d)",
                                   SANDBOX_ENV_MAX);
                return -EINVAL;
        }
        env = calloc((size_t) cJSON_GetArraySize(v) + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        cJSON_ArrayForEach(i, v) {
                char *e = NULL;
                if (cJSON_IsObject(v)) {
                        if (!cJSON_IsString(i) || !env_key_valid(i->string) || asprintf(&e, "%s=%s", i->string, i->valuestring) < 0)
                                e = NULL;
                } else if (cJSON_IsString(i) && strchr(i->valuestring, '=') && i->valuestring[0] != '=')
                        e = strdup(i->valuestring);
                if (!e) {
                        strv_free(env);
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "env entries must be NAME=VALUE with a non-empty NAME");
                        return -EINVAL;
                }
                env[n++] = e;
        }
        *ret = env;
        return 1;
}

int get_strv_field(Request *r, cJSON *o, const char *key, size_t max, char ***ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *i;
        _cleanup_strv_free_ char **l = NULL;

        *ret = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsArray(v) || (size_t) cJSON_GetArraySize(v) > max) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s must be an array of strings (at most %zu)", key, max);
                return -EINVAL;
        }
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        cJSON_ArrayForEach(i, v) {
                if (!cJSON_IsString(i) || !*i->valuestring) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s must be an array of non-empty strings", key);
                        return -EINVAL;
                }
                if (strv_extend(&l, i->valuestring) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 1;
}

int api_egress_header(Request *r, char ***ret) {
        const char *h = http_header(r, "X-Space-Egress-Profiles");
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;
        size_t n = 0;

        *ret = NULL;
        if (!h)
                return 0;
        copy = strdup(h);
        l = calloc(1, sizeof(char *));
        if (!copy || !l)
                return -ENOMEM;
        for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
                if (!egress_profile_name_valid(t) || ++n > EGRESS_PROFILES_MAX) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "X-Space-Egress-Profiles: '%.64s' is not a profile name; expected "
                                           "NAME[,NAME...]", t);
                        return -EINVAL;
                }
                if (strv_extend(&l, t) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 1;
}

static cJSON *strv_to_json_array(char *const *l) {
        cJSON *a = cJSON_CreateArray();

        for (; a && l && *l; l++)
                cJSON_AddItemToArray(a, cJSON_CreateString(*l));
        return a;
}

cJSON *sandbox_egress_to_json(char *const *profiles, char *const *allow, char *const *deny, cJSON *o) {
        cJSON_AddItemToObject(o, "egress_profiles", strv_to_json_array(profiles));
        cJSON_AddItemToObject(o, "egress_allow", strv_to_json_array(allow));
        cJSON_AddItemToObject(o, "egress_deny", strv_to_json_array(deny));
        return o;
}

int get_bool_field(Request *r, cJSON *o, const char *key, bool *ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsBool(v)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s must be true or false", key);
                return -EINVAL;
        }
        *ret = cJSON_IsTrue(v);
        return 1;
}

int get_metadata_field(Request *r, cJSON *o, const char *key, char **ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key), *i;
        size_t bytes = 0;

        *ret = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsObject(v) || cJSON_GetArraySize(v) > SANDBOX_METADATA_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s must be an object of strings (at most %d)", key,
                                   SANDBOX_METADATA_MAX);
                return -EINVAL;
        }
        cJSON_ArrayForEach(i, v) {
                if (!cJSON_IsString(i) || !*i->string) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "%s: each value must be a string, under a non-empty key ('%.64s' is not)",
                                           key, i->string ?: "");
                        return -EINVAL;
                }
                bytes += strlen(i->string) + strlen(i->valuestring);
        }
        if (bytes > SANDBOX_METADATA_BYTES_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s holds %zu bytes of keys and values, over the limit "
                                   "of %d", key, bytes, SANDBOX_METADATA_BYTES_MAX);
                return -EINVAL;
        }
        *ret = cJSON_PrintUnformatted(v);
        return *ret ? 1 : -ENOMEM;
}

cJSON *sandbox_metadata_to_json(const Sandbox *s) {
        cJSON *o = s->metadata ? cJSON_Parse(s->metadata) : NULL;

        if (!cJSON_IsObject(o)) {
                cJSON_Delete(o);
                o = cJSON_CreateObject();
        }
        return o;
}


cJSON *checkpoint_to_json(Checkpoint *c) {
        cJSON *o = cJSON_CreateObject();
        char when[32];

        cJSON_AddStringToObject(o, "id", c->id);
        if (c->name)
                cJSON_AddStringToObject(o, "name", c->name);
        else
                cJSON_AddNullToObject(o, "name");
        cJSON_AddStringToObject(o, "sandbox_id", c->sandbox_id);
        cJSON_AddStringToObject(o, "template", c->template_name);
        cJSON_AddNumberToObject(o, "vcpu", c->vcpu);
        cJSON_AddNumberToObject(o, "memory_mib", (double) c->memory_mib);
        cJSON_AddNumberToObject(o, "disk_mib", (double) c->disk_mib);
        format_rfc3339(c->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        cJSON_AddStringToObject(o, "state", c->ready ? "ready" : "taking");
        cJSON_AddNumberToObject(o, "pause_ms", (double) c->pause_usec / 1000.0);
        cJSON_AddNumberToObject(o, "size_bytes", (double) c->size_bytes);
        return o;
}

cJSON *sandbox_mounts_to_json(Manager *m, char *const *mounts, bool with_id) {
        cJSON *a = cJSON_CreateArray();

        for (char *const *i = mounts; a && i && *i; i++) {
                size_t n = channel_mount_id_len(*i);
                _cleanup_free_ char *id = n ? strndup(*i, n) : NULL;
                Volume *v = id ? volume_find(m, id) : NULL;
                cJSON *o;

                if (!id)
                        continue;
                o = cJSON_CreateObject();
                if (with_id)
                        cJSON_AddStringToObject(o, "volume", id);
                cJSON_AddStringToObject(o, "name", v ? v->rec.name : id);
                cJSON_AddStringToObject(o, "path", channel_mount_path(*i));
                cJSON_AddItemToArray(a, o);
        }
        return a;
}
