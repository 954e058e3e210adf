/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's wire messages without the transport (implemented in dp-grpc.c): each
 * function takes the bytes of one protobuf message exactly as gRPC delivered them and does
 * what the server or the client does with them.  Not for callers outside plugin/; the
 * fuzz harness test/fuzz/fuzz-dp-wire.c drives them directly.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dp.h"

/* Server side: decodes a request (at most DP_MAX_MESSAGE_BYTES), answers it with the
 * handlers h (borrowed) and packs the response into *ret (malloc()ed, *ret_len bytes).
 * Returns 0; -EINVAL for a malformed or out-of-range request, -E2BIG over DP_MAX_CONTAINERS
 * or DP_MAX_IDS, -ENODEV when allocate_check refuses an ID, -ENOSPC when the response would
 * exceed DP_MAX_MESSAGE_BYTES, -ENOMEM; *ret_why says why. */
typedef int (*dp__answer_fn)(const struct dp_handlers *h, const uint8_t *in, size_t len,
                             uint8_t **ret, size_t *ret_len, const char **ret_why);
int dp__allocate_answer(const struct dp_handlers *h, const uint8_t *in, size_t len,
                        uint8_t **ret, size_t *ret_len, const char **ret_why);
int dp__preferred_answer(const struct dp_handlers *h, const uint8_t *in, size_t len,
                         uint8_t **ret, size_t *ret_len, const char **ret_why);
int dp__prestart_answer(const struct dp_handlers *h, const uint8_t *in, size_t len,
                        uint8_t **ret, size_t *ret_len, const char **ret_why);

/* Client side: a GetPreferredAllocation response (must have one container) into a
 * malloc()ed array of IDs as dp_preferred_call returns it, and a PodResources List response
 * into dp_podresources_list's result.  0, -EBADMSG (malformed, or not one container),
 * -E2BIG over the caps, -ENOMEM. */
int dp__preferred_decode(const uint8_t *in, size_t len, char ***ret_ids, unsigned *ret_n,
                         const char **ret_why);
int dp__podresources_decode(const uint8_t *in, size_t len, const char *resource,
                            struct dp_container_devices **ret, size_t *ret_n,
                            const char **ret_why);
