// sdk.test.mjs — `quorum serve` as the official openai npm package sees it
// (make test-sdk; run.sh starts the cluster and two gateways and passes
// their URLs). Each case is a named function; all run, failures are
// counted, the exit status says whether any failed.
//
//   QUORUM_URL       gateway with API key KEY (default settings)
//   QUORUM_URL_ONE   gateway with http.max_in_flight: 1
//   QUORUM_KEY       the API key of both
import assert from "node:assert/strict";
import OpenAI from "openai";

const url = process.env.QUORUM_URL, urlOne = process.env.QUORUM_URL_ONE;
const key = process.env.QUORUM_KEY;
const client = new OpenAI({ baseURL: url + "/v1", apiKey: key,
			    maxRetries: 0, timeout: 60000 });
const Q = "Tom has 3 apples and buys 4 more. How many apples does he have?";
const user = [{ role: "user", content: Q }];

async function models() {
	const list = await client.models.list();
	const ids = list.data.map((m) => m.id);
	assert.deepEqual(ids, ["arith"]);
	assert.ok(!JSON.stringify(list.data).includes(".gguf"),
		  "the model's path is not shown");
	const m = await client.models.retrieve("arith");
	assert.equal(m.id, "arith");
	assert.equal(m.object, "model");
}

async function chatOneChoice() {
	const r = await client.chat.completions.create({ model: "arith",
							 messages: user });
	assert.equal(r.choices.length, 1);
	assert.equal(r.object, "chat.completion");
	assert.match(r.system_fingerprint, /^fp_[0-9a-f]{16}$/);
	const q = r.quorum;
	assert.equal(q.samples, 4, "http.samples: sampling.n");
	// the one choice reached the majority answer
	assert.equal(q.answers[q.choice_samples[0]], q.answer);
	assert.ok(r.choices[0].message.content.includes(q.answer));
	// every sample's tokens are counted
	assert.ok(r.usage.completion_tokens >= 4);
}

async function chatN4() {
	const r = await client.chat.completions.create({ model: "arith",
							 messages: user, n: 4,
							 seed: -1 });
	assert.equal(r.choices.length, 4);
	assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
	assert.equal(r.quorum.samples, 4);
}

async function streamLoop() {
	const s = await client.chat.completions.create({ model: "arith",
							 messages: user,
							 stream: true });
	let text = "", chunks = 0, quorum = null;
	for await (const chunk of s) {
		// the everyday loop: never throws
		text += chunk.choices[0].delta.content || "";
		chunks++;
		if (chunk.quorum)
			quorum = chunk.quorum;
		assert.equal(chunk.usage, undefined);
	}
	assert.ok(chunks >= 2);
	assert.ok(quorum && text.includes(quorum.answer), text);
}

async function streamUsage() {
	const s = await client.chat.completions.create({
		model: "arith", messages: user, stream: true,
		stream_options: { include_usage: true } });
	let usage = null, last = null;
	for await (const chunk of s) {
		if (chunk.usage)
			usage = chunk.usage;
		last = chunk;
	}
	assert.ok(usage && usage.completion_tokens > 0);
	assert.deepEqual(last.choices, [], "the usage chunk comes last");
}

async function expectError(cls, status, code, param, f) {
	try {
		await f();
	} catch (e) {
		assert.ok(e instanceof cls, `${e.constructor.name}: ${e.message}`);
		assert.equal(e.status, status);
		assert.equal(e.code, code);
		if (param !== undefined)
			assert.equal(e.param, param);
		return e;
	}
	assert.fail("no error");
}

async function errors() {
	const bad = new OpenAI({ baseURL: url + "/v1", apiKey: "sk-wrong",
				 maxRetries: 0 });
	await expectError(OpenAI.AuthenticationError, 401, "invalid_api_key",
			  undefined, () => bad.models.list());
	await expectError(OpenAI.NotFoundError, 404, "model_not_found",
			  "model", () => client.chat.completions.create({
				  model: "gpt-nonesuch", messages: user }));
	await expectError(OpenAI.NotFoundError, 404, "model_not_found",
			  "model", () => client.models.retrieve("gpt-x"));
	await expectError(OpenAI.BadRequestError, 400,
			  "invalid_request_error", "temperature",
			  () => client.chat.completions.create({
				  model: "arith", messages: user,
				  temperature: 5 }));
	const e = await expectError(OpenAI.BadRequestError, 400,
				    "invalid_request_error", "messages",
				    () => client.chat.completions.create({
					    model: "arith", messages: [] }));
	assert.match(e.headers.get("x-request-id"), /^req_[0-9a-f]{16}$/);
}

async function rateLimited() {
	const one = new OpenAI({ baseURL: urlOne + "/v1", apiKey: key,
				 maxRetries: 0, timeout: 60000 });
	// a long request holds the gateway's one slot: its stream started
	const s = await one.chat.completions.create({
		model: "arith", messages: user, stream: true, n: 16,
		max_tokens: 400, ignore_eos: true });
	const it = s[Symbol.asyncIterator]();
	await it.next();
	const e = await expectError(OpenAI.RateLimitError, 429,
				    "rate_limit_exceeded", undefined,
				    () => one.chat.completions.create({
					    model: "arith", messages: user }));
	assert.ok(Number(e.headers.get("retry-after")) >= 1);
	s.controller.abort();
}

const cases = { models, chatOneChoice, chatN4, streamLoop, streamUsage,
		errors, rateLimited };
let failed = 0;
for (const [name, f] of Object.entries(cases)) {
	const t0 = Date.now();
	try {
		await f();
		console.log(`ok   ${name} (${Date.now() - t0} ms)`);
	} catch (e) {
		failed++;
		console.log(`FAIL ${name}: ${e.stack || e}`);
	}
}
console.log(`sdk: ${Object.keys(cases).length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
