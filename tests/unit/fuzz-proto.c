/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The deterministic driver of the channel parser's fuzz target, tests/fuzz/fuzz-frames.c (space_frame_reader_feed,
 * space_kv_next / space_kv_get and credit accounting: the code that eats whatever a hostile guest writes), so
 * that it runs as a normal TAP test under ASan/UBSan without libFuzzer: a fixed number of rounds of pure
 * garbage, valid frames and kv payloads with mutations. Files named on the command line are replayed instead
 * (to reproduce a libFuzzer crash). `make fuzz` runs the same target under libFuzzer.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void) {
        /* xorshift64*: deterministic, so failures reproduce */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dULL;
}

static size_t make_input(uint8_t *buf, size_t cap) {
        SpaceBuf b = {};
        size_t n;
        unsigned kind = rnd() % 4, frames;

        buf[0] = (uint8_t) rnd();
        switch (kind) {
        case 0: /* pure garbage */
                n = 1 + rnd() % (cap - 1);
                for (size_t i = 1; i < n; i++)
                        buf[i] = (uint8_t) rnd();
                return n;
        default: /* valid frames (some with kv payloads), then mutated */
                frames = 1 + rnd() % 8;
                for (unsigned f = 0; f < frames; f++) {
                        SpaceBuf kv = {};
                        uint8_t type = 1 + rnd() % (_SPACE_F_MAX - 1);
                        unsigned recs = rnd() % 6;

                        for (unsigned i = 0; i < recs; i++)
                                (void) space_kv_addf(&kv, i % 2 ? "argv" : "env", "v%u=%llu", i,
                                                     (unsigned long long) (rnd() % 1000));
                        if (rnd() % 8 == 0) {
                                size_t extra = rnd() % 5000;
                                for (size_t i = 0; i < extra; i++)
                                        (void) space_buf_append(&kv, "x", 1);
                        }
                        (void) space_frame_append(&b, type, rnd() % 3, (uint32_t) rnd(), kv.data, kv.len);
                        space_buf_done(&kv);
                }
                n = b.len < cap - 1 ? b.len : cap - 1;
                memcpy(buf + 1, b.data, n);
                space_buf_done(&b);
                n++;
                if (kind != 1) {
                        unsigned flips = 1 + rnd() % 8;
                        for (unsigned i = 0; i < flips; i++)
                                buf[1 + rnd() % (n - 1 ? n - 1 : 1)] ^= (uint8_t) (1U << (rnd() % 8));
                }
                if (kind == 3 && n > 2)
                        n = 1 + rnd() % (n - 1); /* truncate */
                return n;
        }
}

int main(int argc, char *argv[]) {
        static uint8_t buf[4 * SPACE_FRAME_MAX];
        unsigned rounds = 20000;

        if (argc > 1) {
                for (int i = 1; i < argc; i++) {
                        FILE *f = fopen(argv[i], "re");
                        size_t n;

                        if (!f) {
                                perror(argv[i]);
                                return 1;
                        }
                        n = fread(buf, 1, sizeof buf, f);
                        fclose(f);
                        LLVMFuzzerTestOneInput(buf, n);
                }
                printf("1..1\nok 1 - replayed %d inputs\n", argc - 1);
                return 0;
        }

        if (getenv("FUZZ_ROUNDS"))
                rounds = (unsigned) strtoul(getenv("FUZZ_ROUNDS"), NULL, 10);
        for (unsigned i = 0; i < rounds; i++) {
                size_t n = make_input(buf, sizeof buf);
                LLVMFuzzerTestOneInput(buf, n);
        }
        printf("1..1\nok 1 - %u fuzz rounds survived\n", rounds);
        return 0;
}
