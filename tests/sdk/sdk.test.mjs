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
	// every sample's tokens are counted; the shipped model does not
	// reason, so none of them went to reasoning
	assert.ok(r.usage.completion_tokens >= 4);
	assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 0);
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

// The sampling settings people send, honoured: logit_bias ("9" is token
// 57 of the shipped model) makes greedy decoding repeat it; a frequency
// penalty of 2 makes it give way; min_p 1 keeps the top token alone
// (greedy's text at any temperature); and with penalties, bias and min_p
// sample i's bytes do not depend on N (two workers split the samples).
async function samplingSettings() {
	const ask = (extra) => client.chat.completions.create({
		model: "arith", messages: user, ...extra });
	let r = await ask({ temperature: 0, max_tokens: 8,
			    logit_bias: { "57": 100 } });
	assert.equal(r.choices[0].message.content, "99999999");
	r = await ask({ temperature: 0, max_tokens: 64,
			logit_bias: { "57": 100 }, frequency_penalty: 2 });
	const text = r.choices[0].message.content;
	assert.ok(text.startsWith("9".repeat(25)) && !/^9+$/.test(text), text);
	const greedy = await ask({ temperature: 0, max_tokens: 24 });
	r = await ask({ temperature: 1, min_p: 1, n: 3, max_tokens: 24 });
	for (const c of r.choices)
		assert.equal(c.message.content,
			     greedy.choices[0].message.content);
	const shaped = { temperature: 1, seed: 5, max_tokens: 24, min_p: 0.05,
			 presence_penalty: 0.5, frequency_penalty: 0.4,
			 logit_bias: { "57": 2, "32": -1 } };
	const four = await ask({ ...shaped, n: 4 });
	const two = await ask({ ...shaped, n: 2 });
	assert.deepEqual(two.choices.map((c) => c.message.content),
			 four.choices.slice(0, 2).map((c) => c.message.content));
	await expectError(OpenAI.BadRequestError, 400, "invalid_request_error",
			  "logit_bias", () => ask({ logit_bias: { "57": 101 } }));
	await expectError(OpenAI.BadRequestError, 400, "invalid_request_error",
			  "presence_penalty", () => ask({ presence_penalty: 3 }));
}

// No silent drops (docs/http.md's table), field by field: each field that
// cannot change the output is taken and ignored, a no-op value is taken,
// anything else is a 400 naming the field.
async function fieldTable() {
	const chat = (extra) => client.chat.completions.create({
		model: "arith", messages: user, max_tokens: 2, n: 1, ...extra });
	const comp = (extra) => client.completions.create({
		model: "arith", prompt: Q, max_tokens: 2, n: 1, ...extra });
	const ignored = { user: "u1", metadata: { a: "b" }, store: false,
			  service_tier: "auto", safety_identifier: "s",
			  prompt_cache_key: "k", parallel_tool_calls: true };
	for (const [k, v] of Object.entries(ignored)) {
		const r = await chat({ [k]: v });
		assert.equal(r.choices.length, 1, k);
	}
	for (const [k, v] of Object.entries({ tool_choice: "none",
					       modalities: ["text"] }))
		await chat({ [k]: v });
	for (const [k, v] of Object.entries({ echo: false, best_of: 1,
					       suffix: "" }))
		await comp({ [k]: v });
	const refusedChat = { tool_choice: "required", modalities: ["audio"],
			      functions: [{ name: "f" }], function_call: "auto",
			      audio: { voice: "alloy", format: "mp3" },
			      prediction: { type: "content", content: "x" },
			      web_search_options: {}, verbosity: "low",
			      top_logprobs: 2, frobnicate: 1, prompt: "x",
			      tools: [{ type: "function",
					function: { name: "f" } }] };
	for (const [k, v] of Object.entries(refusedChat))
		await expectError(OpenAI.BadRequestError, 400,
				  "invalid_request_error", k,
				  () => chat({ [k]: v }));
	const refusedComp = { echo: true, best_of: 2, suffix: "end",
			      logprobs: 6, messages: [], top_logprobs: 1,
			      frobnicate: 1 };
	for (const [k, v] of Object.entries(refusedComp))
		await expectError(OpenAI.BadRequestError, 400,
				  "invalid_request_error", k,
				  () => comp({ [k]: v }));
}

// Inside messages[] (docs/http.md's table): text parts and a name are
// taken (the same reply as the plain string), each field or part quorum
// does not do is a 400 naming its place.
async function messageFields() {
	const ask = (messages) => client.chat.completions.create({
		model: "arith", messages, max_tokens: 8, n: 2, seed: 4 });
	const plain = await ask(user);
	const parts = await ask([{ role: "user", name: "ann", content: [
		{ type: "text", text: Q.slice(0, 10) },
		{ type: "text", text: Q.slice(10) }] }]);
	assert.deepEqual(parts.choices.map((c) => c.message.content),
			 plain.choices.map((c) => c.message.content));
	// a conversation: its earlier turns are the prompt's prior turns
	const conv = await ask([
		{ role: "user", content: "What is 2 + 2?" },
		{ role: "assistant", content: "2 + 2 = 4. The answer is 4." },
		...user]);
	assert.equal(conv.choices.length, 2);
	assert.ok(conv.usage.prompt_tokens > plain.usage.prompt_tokens);
	// a reply's message appended as it came (refusal: null), with the
	// reasoning a thinking model's reply carries: taken, and not shown
	const reply = { ...conv.choices[0].message,
			reasoning_content: "Two and two." };
	assert.equal(reply.refusal, null);
	const next = [...user, { ...conv.choices[0].message }, ...user];
	const bare = await ask([...user, { role: "assistant",
		content: conv.choices[0].message.content }, ...user]);
	assert.deepEqual((await ask(next)).choices.map((c) => c.message),
			 bare.choices.map((c) => c.message));
	assert.deepEqual((await ask([...user, reply, ...user])).choices.map(
		(c) => c.message), bare.choices.map((c) => c.message));
	const call = { id: "c1", type: "function",
		       function: { name: "f", arguments: "{}" } };
	const refused = [
		[[...user, { role: "assistant", content: null,
			     tool_calls: [call] }], "messages[1].tool_calls"],
		[[...user, { role: "tool", content: "7", tool_call_id: "c1" }],
		 "messages[1].tool_call_id"],
		[[...user, { role: "assistant", refusal: "no" }],
		 "messages[1].refusal"],
		[[...user, { role: "assistant", audio: { id: "a1" } }],
		 "messages[1].audio"],
		[[...user, { role: "assistant", function_call: {
			name: "f", arguments: "{}" } }],
		 "messages[1].function_call"],
		[[{ role: "user", content: Q, tool_call_id: "c1" }],
		 "messages[0].tool_call_id"],
		[[{ role: "user", content: Q, frobnicate: 1 }],
		 "messages[0].frobnicate"],
		[[{ role: "user", content: [{ type: "image_url",
			image_url: { url: "http://x/a.png" } }] }],
		 "messages[0].content[0]"],
		[[{ role: "user", content: [{ type: "input_audio",
			input_audio: { data: "AA==", format: "wav" } }] }],
		 "messages[0].content[0]"],
		[[{ role: "user", content: [{ type: "file",
			file: { file_id: "f1" } }] }], "messages[0].content[0]"],
		[[{ role: "user", content: [{ type: "text", text: Q,
					      cache_control: {} }] }],
		 "messages[0].content[0].cache_control"],
	];
	for (const [messages, param] of refused)
		await expectError(OpenAI.BadRequestError, 400,
				  "invalid_request_error", param,
				  () => ask(messages));
}

// Alternatives in OpenAI's shapes through the SDK: chat top_logprobs 3
// (each chosen token's three likeliest, token, logprob and bytes) and
// completions logprobs 2 ({token: logprob} per position); the chosen
// token's own logprob is the one reported without alternatives.
async function topLogprobs() {
	const base = { model: "arith", messages: user, n: 2, seed: 8,
		       temperature: 1, max_tokens: 12, logprobs: true };
	const k0 = await client.chat.completions.create(base);
	const k3 = await client.chat.completions.create({ ...base,
							  top_logprobs: 3 });
	for (const [i, c] of k3.choices.entries()) {
		const content = c.logprobs.content;
		const plain = k0.choices[i].logprobs.content;
		assert.equal(content.length, plain.length);
		assert.ok(content.length > 0);
		for (const [k, e] of content.entries()) {
			assert.equal(e.logprob, plain[k].logprob);
			assert.ok(e.top_logprobs.length >= 1 &&
				  e.top_logprobs.length <= 3);
			let prev = 0;
			for (const a of e.top_logprobs) {
				assert.equal(typeof a.token, "string");
				assert.ok(a.logprob <= prev);
				prev = a.logprob;
				if (!a.token.includes("\ufffd")) // a whole one
					assert.deepEqual(a.bytes,
							 [...Buffer.from(a.token)]);
			}
			const last = e.top_logprobs.at(-1).logprob;
			if (e.logprob > last)
				assert.ok(e.top_logprobs.some((a) =>
					a.logprob === e.logprob), e.token);
		}
	}
	// streamed: the chunks' lists joined, as the SDK's own stream
	// helper joins them, are the plain response's
	const s = client.chat.completions.stream({ ...base, top_logprobs: 3 });
	const fin = await s.finalChatCompletion();
	for (const [i, c] of fin.choices.entries())
		assert.deepEqual(c.logprobs.content,
				 k3.choices[i].logprobs.content);
	const comp = await client.completions.create({
		model: "arith", prompt: Q, n: 1, seed: 8, temperature: 1,
		max_tokens: 12, logprobs: 2 });
	const lp = comp.choices[0].logprobs;
	assert.equal(lp.top_logprobs.length, lp.tokens.length);
	for (const t of lp.top_logprobs) {
		const v = Object.values(t);
		assert.ok(v.length >= 1 && v.length <= 2);
		assert.ok(v.every((x) => x <= 0));
	}
}

// Structured output on the shipped model: every choice ends, parses and
// holds the schema's one field (a pattern bounds its length: the model
// was never taught JSON, and an integer's digits need not end).
async function jsonSchema() {
	const schema = { type: "object", required: ["answer"],
			 properties: { answer: { type: "string",
						 pattern: "^[0-9]{1,4}$" } },
			 additionalProperties: false };
	const r = await client.chat.completions.create({
		model: "arith", messages: user, n: 4, max_tokens: 256,
		response_format: { type: "json_schema",
				   json_schema: { name: "answer", schema } } });
	assert.equal(r.choices.length, 4);
	for (const c of r.choices) {
		assert.equal(c.finish_reason, "stop", c.message.content);
		const o = JSON.parse(c.message.content);
		assert.deepEqual(Object.keys(o), ["answer"], c.message.content);
		assert.match(o.answer, /^[0-9]{1,4}$/, c.message.content);
	}
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

// The Responses API: the chat path's voted answer as a response (the
// SDK's output_text is chat's content), a response's output appended to
// the next input as the conversation's turn, the stream's events as the
// SDK iterates them, and errors named by the Responses API's fields.
async function responses() {
	const base = { model: "arith", max_output_tokens: 24, seed: 7 };
	const chat = (messages) => client.chat.completions.create({
		model: "arith", max_tokens: 24, seed: 7, messages });
	const sys = { role: "system", content: "Be brief." };
	const r = await client.responses.create({ ...base, input: Q,
						  instructions: "Be brief." });
	assert.equal(r.object, "response");
	assert.ok(["completed", "incomplete"].includes(r.status));
	const c = await chat([sys, ...user]);
	assert.ok(r.output_text.length > 0);
	assert.equal(r.output_text, c.choices[0].message.content);
	assert.deepEqual(r.quorum.votes, c.quorum.votes);
	assert.equal(r.usage.input_tokens, c.usage.prompt_tokens);
	assert.equal(r.usage.output_tokens_details.reasoning_tokens,
		     c.usage.completion_tokens_details.reasoning_tokens);
	const next = { role: "user", content: "And 2 more?" };
	const r2 = await client.responses.create({ ...base,
		input: [...user, ...r.output, next] });
	const c2 = await chat([...user, { role: "assistant",
					  content: r.output_text }, next]);
	assert.equal(r2.output_text, c2.choices[0].message.content);
	const s = await client.responses.create({ ...base, input: Q,
		instructions: "Be brief.", stream: true });
	let deltas = "", done = null, seq = 0;
	for await (const e of s) {
		assert.equal(e.sequence_number, seq++);
		if (e.type === "response.output_text.delta")
			deltas += e.delta;
		if (e.type === "response.completed" ||
		    e.type === "response.incomplete")
			done = e.response;
	}
	assert.equal(deltas, r.output_text);
	assert.ok(done);
	assert.deepEqual(done.quorum.votes, r.quorum.votes);
	// one sample: live, its deltas as it decodes, the same text
	const one = await client.responses.create({ ...base, input: Q,
						    samples: 1 });
	const live = await client.responses.create({ ...base, input: Q,
						     samples: 1, stream: true });
	let text = "";
	for await (const e of live)
		if (e.type === "response.output_text.delta")
			text += e.delta;
	assert.equal(text, one.output_text);
	// the SDK's stream helper builds the response from the events
	const helper = client.responses.stream({ ...base, input: Q,
						 samples: 1 });
	const built = await helper.finalResponse();
	const msg = built.output.find((o) => o.type === "message");
	assert.equal(msg.content[0].text, one.output_text);
	await expectError(OpenAI.BadRequestError, 400, "invalid_request_error",
			  "max_output_tokens", () => client.responses.create({
				  ...base, input: Q, max_output_tokens: 0 }));
	await expectError(OpenAI.BadRequestError, 400, "invalid_request_error",
			  "previous_response_id",
			  () => client.responses.create({ ...base, input: Q,
				  previous_response_id: r.id }));
}

const cases = { models, chatOneChoice, chatN4, streamLoop, streamUsage,
		errors, samplingSettings, fieldTable, messageFields,
		topLogprobs, jsonSchema, responses, rateLimited };
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
