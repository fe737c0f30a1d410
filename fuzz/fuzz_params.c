/*
 * fuzz_params — libFuzzer target: the sampling settings through the
 * doors untrusted bytes reach them by: the HTTP gateway's request bodies
 * (tools/gateway/openai.c, what every client sends; responses.c, the
 * Responses API's, turned into chat's) and the wire's
 * SamplingParams (net/spwire.c, what a peer sends the coordinator and
 * the workers).
 *
 * Input: byte 0 picks the door: 'w' the rest is a packed SamplingParams,
 * unpacked and decoded (spwire_decode) over the defaults, as a worker
 * takes a job's; 'c' a /v1/chat/completions body, 'r' a /v1/responses
 * one (responses_parse), anything else a /v1/completions one, parsed by
 * openai_parse as the gateway parses it (limits.max_n 256), then
 * openai_settle with http.samples 8.
 *
 * Properties beyond "no crash, no leak, no UB, bounded time":
 * - a refusal leaves a message (never empty); the wire's names the
 *   setting it refuses, in sc/params' words ("NAME = VALUE: ..." or
 *   "NAME: ...");
 * - what is accepted passes sc_params_check (the engine's and the
 *   workers' guard): neither door lets through what a worker refuses;
 * - the settings given survive the wire: encoded into a SamplingParams
 *   (spwire_encode, every field it has), packed, unpacked and decoded
 *   they are the same settings with the same values, as a worker reads
 *   them (an empty list of stop strings is not carried: spwire.h);
 * - a refused n's message, as the gateway words it
 *   (openai_setting_words), names a field or none, never an empty one.
 * Seeds: fuzz/corpus/params/ (hand-written requests, and SamplingParams
 * written by hand in protobuf's encoding).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/spwire.h"
#include "qerr.h"
#include "sc/params.h"
#include "tools/gateway/openai.h"
#include "tools/gateway/responses.h"

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_params: %s%s%s\n", what, detail ? ": " : "",
		detail ? detail : "");
	abort();
}

/* Setting id of a and b the same value. */
static int same_setting(int id, const sc_params *a, const sc_params *b)
{
	const sc_setting *s = sc_params_setting(id);
	static char ba[SC_VALUE_TEXT_MAX], bb[SC_VALUE_TEXT_MAX];
	sc_value va, vb;

	sc_params_value(id, a, &va, ba, sizeof(ba));
	sc_params_value(id, b, &vb, bb, sizeof(bb));
	switch (s->kind) {
	case SC_K_INT:
	case SC_K_BOOL:
		return va.i == vb.i;
	case SC_K_U64:
		return va.u == vb.u;
	case SC_K_REAL:
		return va.d == vb.d;
	case SC_K_TEXT:
		if (id == SC_S_GRAMMAR)
			return va.len == vb.len &&
			       (!va.len || !memcmp(va.s, vb.s, va.len));
		return !strcmp(va.s, vb.s);
	case SC_K_STRS:
		if (a->stop_strs.n != b->stop_strs.n)
			return 0;
		for (int i = 0; i < a->stop_strs.n; i++)
			if (a->stop_strs.len[i] != b->stop_strs.len[i] ||
			    memcmp(a->stop_strs.s[i], b->stop_strs.s[i],
				   a->stop_strs.len[i]))
				return 0;
		return 1;
	}
	return 0;
}

/* The request's settings through SamplingParams and back. */
static void wire_round_trip(const openai_req *r)
{
	unsigned which = r->given & spwire_fields(), got = 0;
	/* none: not carried (spwire.h) */
	if (!r->p.stop_strs.n)
		which &= ~SC_BIT(SC_S_STOP_STRINGS);
	Quorum__SamplingParams m, *u;
	static spwire_buf b;
	sc_params p2 = SC_PARAMS_DEFAULTS;
	uint8_t *buf;
	size_t n;

	spwire_encode(&r->p, which, &m, &b);
	n = quorum__sampling_params__get_packed_size(&m);
	if (!(buf = malloc(n ? n : 1)))
		abort();
	if (quorum__sampling_params__pack(&m, buf) != n)
		fail("SamplingParams packed to another size", NULL);
	if (!(u = quorum__sampling_params__unpack(NULL, n, buf)))
		fail("SamplingParams of an accepted request does not unpack",
		     NULL);
	if (spwire_decode(u, &p2, &got))
		fail("a worker refuses an accepted request's settings",
		     qerr_detail());
	if (got != which) {
		fprintf(stderr, "fuzz_params: given 0x%x, the wire carried "
			"0x%x\n", which, got);
		abort();
	}
	for (int id = 0; id < SC_S_COUNT_; id++)
		if ((which & SC_BIT(id)) && !same_setting(id, &r->p, &p2))
			fail("a setting changed on the wire",
			     sc_params_setting(id)->name);
	quorum__sampling_params__free_unpacked(u, NULL);
	free(buf);
}

/* A peer's SamplingParams (the wire door). */
static void wire_door(const uint8_t *data, size_t size)
{
	Quorum__SamplingParams *m;
	openai_req r = {.p = SC_PARAMS_DEFAULTS};
	const char *d;

	if (!(m = quorum__sampling_params__unpack(NULL, size, data)))
		return; /* fuzz_wire's: not a message */
	if (spwire_decode(m, &r.p, &r.given)) {
		d = qerr_detail();
		if (!d[0])
			fail("a refused SamplingParams has no message", NULL);
		/* sc/params' words: the setting's name first */
		for (int id = 0; id < SC_S_COUNT_; id++) {
			const char *nm = sc_params_setting(id)->name;
			size_t n = strlen(nm);

			if (!strncmp(d, nm, n) && (d[n] == ' ' || d[n] == ':'))
				goto named;
		}
		fail("a refused SamplingParams names no setting", d);
named:
		quorum__sampling_params__free_unpacked(m, NULL);
		return;
	}
	if (sc_params_check(&r.p))
		fail("decoded settings fail sc_params_check", qerr_detail());
	/* p.grammar points into m: the round trip before m goes */
	wire_round_trip(&r);
	quorum__sampling_params__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char msg[1024], words[1024];
	const char *param = NULL;
	openai_req r;
	int chat;

	if (!size)
		return 0;
	if (data[0] == 'w') {
		wire_door(data + 1, size - 1);
		return 0;
	}
	chat = data[0] == 'c';
	msg[0] = 0;
	if (data[0] == 'r'
		    ? responses_parse((const char *)data + 1, size - 1, 256, &r,
				      msg, sizeof(msg), &param)
		    : openai_parse(chat, (const char *)data + 1, size - 1, 256,
				   &r, msg, sizeof(msg), &param)) {
		if (!msg[0])
			fail("a refused body has no message", NULL);
		openai_req_free(&r);
		return 0;
	}
	if (!r.question)
		fail("an accepted body has no question", NULL);
	if (data[0] == 'r' && (!r.chat || !r.responses || !r.echo))
		fail("an accepted Responses body is not chat's with its echo",
		     NULL);
	if (sc_params_check(&r.p))
		fail("an accepted body's settings fail sc_params_check",
		     qerr_detail());
	wire_round_trip(&r);
	msg[0] = 0;
	param = NULL;
	if (openai_settle(&r, 8, msg, sizeof(msg), &param)) {
		if (!msg[0])
			fail("a refused n has no message", NULL);
		/* the message as the gateway words it: the request's
		 * field, or none */
		param = openai_setting_words(&r, msg, words, sizeof(words));
		if (param && !param[0])
			fail("a refused setting names an empty field", words);
	} else if (sc_params_check(&r.p)) {
		fail("a settled request's settings fail sc_params_check",
		     qerr_detail());
	}
	openai_req_free(&r);
	return 0;
}
