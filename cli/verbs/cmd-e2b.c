/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_e2b_help = {
        .synopsis = "e2b env [--url]",
        .summary = "Print the environment that points E2B's SDKs at this daemon (eval \"$(spacectl e2b env)\")",
        .options =
        "Sub-verbs:\n"
        "  env           mint an API key and print shell 'export' lines for E2B's SDKs: E2B_DOMAIN, E2B_API_KEY,\n"
        "                SSL_CERT_FILE, CURL_CA_BUNDLE and REQUESTS_CA_BUNDLE (the host's CAs and the local CA)\n"
        "                and NODE_EXTRA_CA_CERTS (the local CA), and 'unset' of E2B_API_URL, E2B_SANDBOX_URL,\n"
        "                E2B_VOLUME_API_URL and E2B_DEBUG\n"
        "\n"
        "Options:\n"
        "      --url     env: E2B_API_URL, E2B_SANDBOX_URL and E2B_VOLUME_API_URL (the plain TCP listener) and\n"
        "                E2B_API_KEY instead\n"
        "  -h, --help    show this help\n",
};

/* value in single quotes for a POSIX shell: ' becomes '\'' */
static void print_export(const char *name, const char *value) {
        printf("export %s='", name);
        for (const char *p = value; *p; p++)
                if (*p == '\'')
                        fputs("'\\''", stdout);
                else
                        putchar(*p);
        fputs("'\n", stdout);
}

/* A new API key (POST /v1/keys), or NULL after saying why. */
static char *mint_key(void) {
        SpaceHttpReply reply = {};
        cJSON *body = cJSON_CreateObject();
        char *key = NULL;
        int r;

        if (!body || !cJSON_AddStringToObject(body, "name", "e2b-env")) {
                cJSON_Delete(body);
                log_error("out of memory");
                return NULL;
        }
        r = cli_call("POST", "/v1/keys", body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return NULL;
        if (!json_str(reply.json, "key"))
                log_error("the daemon created a key but did not return it");
        else if (!(key = strdup(json_str(reply.json, "key"))))
                log_error("out of memory");
        else
                fprintf(stderr, "Created API key %s (e2b-env) for this environment; revoke it with 'spacectl key rm "
                        "%s'.\n", json_str(reply.json, "id") ?: "?", json_str(reply.json, "id") ?: "ID");
        space_http_reply_done(&reply);
        return key;
}

static int e2b_env(int argc, char *argv[]) {
        _cleanup_free_ char *key = NULL;
        SpaceHttpReply reply = {};
        bool url = false;
        const cJSON *e2b;
        const char *api_url, *sandbox_url, *domain, *tls_url, *ca_file, *ca_bundle, *config;
        int r;
        const CliOption options[] = {
                CLI_FLAG("url", 0, &url),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("e2b env takes no arguments, got '%s'", argv[optind]);

        if (cli_call("GET", "/v1/info", NULL, &reply) < 0)
                return EXIT_FAIL;
        e2b = cJSON_GetObjectItemCaseSensitive(reply.json, "e2b");
        if (!cJSON_IsObject(e2b)) {
                log_error("the daemon does not say where E2B's SDKs reach it (no \"e2b\" in GET /v1/info): is it "
                          "older than this spacectl? Restart it with 'spacectl daemon restart'");
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        api_url = json_str(e2b, "api_url");
        sandbox_url = json_str(e2b, "sandbox_url");
        domain = json_str(e2b, "domain");
        tls_url = json_str(e2b, "tls_url");
        ca_file = json_str(e2b, "ca_file");
        ca_bundle = json_str(e2b, "ca_bundle");
        config = json_str(cJSON_GetObjectItemCaseSensitive(reply.json, "config"), "file") ?: "spaced.conf";
        if (url && (!api_url || !sandbox_url)) {
                log_error("the daemon has no plain TCP listener ('listen = off' in %s): set 'listen = "
                          "127.0.0.1:PORT' and restart it, or use 'spacectl e2b env' (TLS)", config);
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        if (!url && (!tls_url || !domain || !ca_file || !ca_bundle)) {
                log_error("the daemon has no TLS listener ('e2b_tls_listen = off' in %s): set 'e2b_tls_listen = "
                          "127.0.0.1:PORT' and restart it, or use 'spacectl e2b env --url' (plain HTTP)", config);
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        key = mint_key();
        if (!key) {
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        if (url) {
                print_export("E2B_API_URL", api_url);
                print_export("E2B_SANDBOX_URL", sandbox_url);
                /* the volume content API, which the SDKs would look for at api.<domain> */
                print_export("E2B_VOLUME_API_URL", api_url);
                print_export("E2B_API_KEY", key);
                puts("unset E2B_DOMAIN E2B_DEBUG");
        } else {
                print_export("E2B_DOMAIN", domain);
                print_export("E2B_API_KEY", key);
                /* the bundle for OpenSSL and Python's ssl (SSL_CERT_FILE), curl and Python's requests, which
                 * keep bundles of their own; Node adds the CA to its own */
                print_export("SSL_CERT_FILE", ca_bundle);
                print_export("CURL_CA_BUNDLE", ca_bundle);
                print_export("REQUESTS_CA_BUNDLE", ca_bundle);
                print_export("NODE_EXTRA_CA_CERTS", ca_file);
                puts("unset E2B_API_URL E2B_SANDBOX_URL E2B_VOLUME_API_URL E2B_DEBUG");
        }
        space_http_reply_done(&reply);
        return fflush(stdout) != 0 ? EXIT_FAIL : 0;
}

static const SubVerb e2b_verbs[] = {
        { "env", e2b_env },
};

int cmd_e2b(int argc, char *argv[]) {
        return cli_run_sub_verb(e2b_verbs, ELEMENTSOF(e2b_verbs), argc, argv);
}
