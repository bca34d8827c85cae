/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/secret/secret.c against a real SQLite file and a real state directory: names and values checked (the
 * shapes an attacker tries first: header injection, NUL, bad UTF-8, an id's shape, too long), metadata checked,
 * versions count up, the value is only in its 0600 file (not in the database), a restart finds the secrets,
 * removes files no row names and marks rows whose file is gone, and a remove takes row and file. lib/utf8.c's
 * checks are here too. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/utf8.h"
#include "core/manager.h"
#include "core/store.h"
#include "core/util.h"
#include "secret/secret.h"
#include "tap.h"

static bool file_has(const char *path, const char *needle) {
        _cleanup_fclose_ FILE *f = fopen(path, "rb");
        char buf[65536];
        size_t n;

        if (!f)
                return false;
        n = fread(buf, 1, sizeof buf, f);
        return memmem(buf, n, needle, strlen(needle)) != NULL;
}

static void test_utf8(void) {
        ok(utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15), "UTF-8: 2, 3 and 4 byte characters");
        ok(!utf8_valid("\xc0\xaf", 2), "UTF-8: an overlong '/' is refused");
        ok(!utf8_valid("\xed\xa0\x80", 3), "UTF-8: a surrogate is refused");
        ok(!utf8_valid("\xf4\x90\x80\x80", 4), "UTF-8: above U+10FFFF is refused");
        ok(!utf8_valid("a\0b", 3), "UTF-8: NUL is refused");
        ok(!utf8_valid("\xe2\x82", 2), "UTF-8: a character cut short is refused");
        ok(utf8_incomplete_tail((const uint8_t *) "ab\xe2\x82", 4) == 2, "a cut 3-byte character: 2 bytes to wait for");
        ok(utf8_incomplete_tail((const uint8_t *) "ab\xe2\x82\xac", 5) == 0, "a whole one: nothing to wait for");
        ok(utf8_incomplete_tail((const uint8_t *) "ab\xff", 3) == 0, "a byte that starts nothing: nothing to wait for");
}

static void test_checks(void) {
        char big[SECRET_VALUE_MAX + 2];
        _cleanup_free_ char *json = NULL;
        Error e = {};
        cJSON *md;

        ok(secret_name_valid("openai-key") && secret_name_valid("A.b_c-1") && secret_name_valid("x"),
           "names: letters, digits, '.', '_', '-'");
        ok(!secret_name_valid("") && !secret_name_valid("-x") && !secret_name_valid(".x") && !secret_name_valid("a b") &&
           !secret_name_valid("a/b") && !secret_name_valid("${e2b.secrets.x}") && !secret_name_valid(NULL),
           "names: empty, leading '-' or '.', space, '/', '{' refused");
        memset(big, 'a', sizeof big);
        big[SECRET_NAME_MAX] = '\0';
        ok(secret_name_valid(big), "a name of %d characters", SECRET_NAME_MAX);
        big[SECRET_NAME_MAX] = 'a';
        big[SECRET_NAME_MAX + 1] = '\0';
        ok(!secret_name_valid(big), "one more is refused");
        ok(!secret_name_valid("sec-0123456789abcdef") && secret_name_valid("sec-0123456789abcdeg") &&
           secret_name_valid("sec-0123456789abcde"), "a name in an id's shape is refused, near ones are fine");

        ok(!secret_value_problem("sk-123", 6) && !secret_value_problem("a\tb", 3) &&
           !secret_value_problem("p\xc3\xa4ss", 5), "values: text, tab, UTF-8");
        ok(secret_value_problem("a\r\nX-Evil: 1", 12) != NULL, "a CR LF (header injection) is refused");
        ok(secret_value_problem("a\nb", 3) && secret_value_problem("a\0b", 3) && secret_value_problem("a\x7f", 2) &&
           secret_value_problem("a\x1b[2J", 5), "LF, NUL, DEL and escapes are refused");
        ok(secret_value_problem("\xff\xfe", 2) != NULL, "bytes that are no UTF-8 are refused");
        ok(secret_value_problem("", 0) != NULL, "an empty value is refused");
        memset(big, 'a', sizeof big);
        ok(!secret_value_problem(big, SECRET_VALUE_MAX), "%d bytes are fine", SECRET_VALUE_MAX);
        ok(secret_value_problem(big, SECRET_VALUE_MAX + 1) != NULL, "one more is refused");
        ok(!strstr(secret_value_problem("sk-LEAK\n", 8), "sk-LEAK"), "the problem never quotes the value");

        ok(secret_metadata_check(NULL, &json, &e) == 0 && streq(json, "{}"), "no metadata is {}");
        json = mfree(json);
        md = cJSON_Parse("{\"owner\": \"ci\", \"t\": \"\"}");
        ok(secret_metadata_check(md, &json, &e) == 0 && streq(json, "{\"owner\":\"ci\",\"t\":\"\"}"),
           "string metadata is kept: %s", json ?: "-");
        cJSON_Delete(md);
        json = mfree(json);
        md = cJSON_Parse("{\"n\": 5}");
        ok(secret_metadata_check(md, &json, &e) == -EINVAL && e.code == ERROR_INVALID_ARGUMENT && e.message &&
           strstr(e.message, "'n'"), "a value that is no string is refused, naming its key");
        cJSON_Delete(md);
        error_done(&e);
        md = cJSON_Parse("[\"x\"]");
        ok(secret_metadata_check(md, &json, &e) == -EINVAL, "metadata that is no object is refused");
        cJSON_Delete(md);
        error_done(&e);
        md = cJSON_CreateObject();
        for (int i = 0; i <= SECRET_METADATA_KEYS_MAX; i++) {
                char k[16];
                snprintf(k, sizeof k, "k%d", i);
                cJSON_AddStringToObject(md, k, "v");
        }
        ok(secret_metadata_check(md, &json, &e) == -EINVAL, "more than %d keys are refused", SECRET_METADATA_KEYS_MAX);
        cJSON_Delete(md);
        error_done(&e);
}

static void manager_open(Manager *m, const char *dir) {
        _cleanup_free_ char *db = NULL;
        Error e = {};

        ASSERT(asprintf(&db, "%s/space.db", dir) > 0);
        ASSERT(store_open(db, &m->store, &e) == 0);
        m->state_dir = (char *) dir;
        m->secrets = NULL;
        ASSERT(secrets_load(m, &e) == 0);
}

static void manager_close(Manager *m) {
        secrets_free(m);
        m->store = store_close(m->store);
}

static void test_store(void) {
        char tmpl[] = "/tmp/test-secret.XXXXXX";
        const char *dir = mkdtemp(tmpl);
        _cleanup_free_ char *db = NULL, *vpath = NULL, *stray = NULL, *value = NULL;
        Manager m = {};
        Error e = {};
        Secret *s = NULL, *t = NULL;
        bool created = false;
        struct stat st;
        size_t len = 0;

        ASSERT(dir);
        ASSERT(asprintf(&db, "%s/space.db", dir) > 0);
        manager_open(&m, dir);
        ok(stat(m.state_dir, &st) == 0, "state dir is there");
        ASSERT(asprintf(&stray, "%s/secrets", dir) > 0);
        ok(stat(stray, &st) == 0 && (st.st_mode & 0777) == 0700, "the secrets directory is 0700");
        stray = mfree(stray);

        ok(secret_set(&m, "api", "sk-first-VALUE", 14, "{\"o\":\"1\"}", SECRET_CREATE, &s, &created, &e) == 0 && s &&
           created && s->rec.version == 1, "create: version 1");
        ok(secret_set(&m, "api", "x", 1, NULL, SECRET_CREATE, NULL, NULL, &e) == -EEXIST && e.code == ERROR_NAME_IN_USE,
           "a second create of the name: name_in_use");
        error_done(&e);
        ok(secret_set(&m, "nope", "x", 1, NULL, SECRET_UPDATE, NULL, NULL, &e) == -ENOENT &&
           e.code == ERROR_SECRET_NOT_FOUND, "an update of none: secret_not_found");
        error_done(&e);
        ok(secret_set(&m, "bad name", "x", 1, NULL, SECRET_UPSERT, NULL, NULL, &e) == -EINVAL, "a bad name: refused");
        error_done(&e);
        ok(secret_set(&m, "api", "a\nb", 3, NULL, SECRET_UPSERT, NULL, NULL, &e) == -EINVAL && s->rec.version == 1,
           "a bad value: refused, the version unchanged");
        error_done(&e);
        ok(secret_set(&m, s->rec.id, "sk-second-VALUE", 15, NULL, SECRET_UPDATE, &t, &created, &e) == 0 && t == s &&
           !created && s->rec.version == 2 && streq(s->rec.metadata, "{\"o\":\"1\"}"),
           "an update by id: version 2, metadata kept");
        ASSERT(asprintf(&vpath, "%s/secrets/%s", dir, s->rec.id) > 0);
        ok(stat(vpath, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 15, "the value's file: 0600, 15 bytes");
        ok(!file_has(db, "sk-first-VALUE") && !file_has(db, "sk-second-VALUE"), "no value is in the database file");
        ok(secret_value_read(&m, s, &value, &len) == 0 && len == 15 && streq(value, "sk-second-VALUE") &&
           s->rec.last_used_at > 0, "the daemon reads the newest value, and the use is recorded");
        secret_value_free(value, len);
        value = NULL;
        ok(secret_set(&m, "other", "v", 1, NULL, SECRET_UPSERT, &t, &created, &e) == 0 && created, "an upsert creates");
        ok(m.secrets == s && s->next == t, "the list is oldest first");
        ok(secret_find(&m, "api") == s && secret_find(&m, s->rec.id) == s && !secret_find(&m, "API") &&
           !secret_find(&m, "ap"), "found by exact name or id, not by case or prefix");

        /* a restart: a stray file goes, a row without its file is marked */
        ASSERT(asprintf(&stray, "%s/secrets/sec-00000000000000aa", dir) > 0);
        ASSERT(close(open(stray, O_CREAT | O_WRONLY, 0600)) == 0);
        _cleanup_free_ char *other_path = NULL;
        ASSERT(asprintf(&other_path, "%s/secrets/%s", dir, t->rec.id) > 0);
        ASSERT(unlink(other_path) == 0);
        manager_close(&m);
        manager_open(&m, dir);
        s = secret_find(&m, "api");
        t = secret_find(&m, "other");
        ok(s && s->rec.version == 2 && streq(s->rec.metadata, "{\"o\":\"1\"}") && s->rec.last_used_at > 0 &&
           !s->value_missing, "after a restart: version, metadata and last use are kept");
        ok(t && t->value_missing, "a secret whose file is gone is marked value_missing");
        ok(access(stray, F_OK) < 0, "a file no row names is removed");
        ok(t && secret_value_read(&m, t, &value, &len) == -ENOENT, "reading a missing value: -ENOENT");
        ok(t && secret_set(&m, "other", "w", 1, NULL, SECRET_UPSERT, NULL, NULL, &e) == 0 && !t->value_missing &&
           t->rec.version == 2, "setting it again mends it");

        ok(secret_remove(&m, s, &e) == 0 && !secret_find(&m, "api") && access(vpath, F_OK) < 0,
           "remove: row and file gone");
        manager_close(&m);
        manager_open(&m, dir);
        ok(!secret_find(&m, "api") && secret_find(&m, "other"), "... also after a restart");
        manager_close(&m);
        error_done(&e);
        ASSERT(rm_rf(dir) == 0);
}

int main(void) {
        plan(0);
        test_utf8();
        test_checks();
        test_store();
        return done();
}
