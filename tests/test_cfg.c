/* cfg: the cluster configuration — the example file, defaults, every error
 * class with its exact line:column, and random mutations of the example. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf/cfg.h"
#include "text/jschema.h"
#include "text/prompt.h"
#include "qerr.h"

#define EXAMPLE "config/cluster.yaml"

/* The two required keys, on lines 1 and 2: case text starts at line 3. */
#define BASE "model: {path: m.gguf}\ncluster: {name: c}\n"

/* ---- errors --------------------------------------------------------------- */

struct ecase {
	const char *name;
	const char *yaml;
	size_t len;        /* 0: strlen(yaml) */
	int code;
	const char *where; /* "line:col" */
	const char *msg;   /* a substring of the message */
};

#define E(n, y, c, w, m) {n, y, 0, c, w, m}
#define EL(n, y, c, w, m) {n, y, sizeof(y) - 1, c, w, m}

static const struct ecase ecases[] = {
	/* YAML layer */
	E("syntax_unclosed_flow", BASE "kv: [1, 2\n", QERR_FORMAT, "4:1",
	  "did not find expected ',' or ']' (while parsing a flow sequence "
	  "started at 3:5)"),
	E("syntax_mapping_in_plain", BASE "kv: a: b\n", QERR_FORMAT, "3:6",
	  "mapping values are not allowed"),
	E("syntax_bad_indent", BASE "kv:\n  blocks: 3\n bad: 1\n", QERR_FORMAT,
	  "5:2", "YAML syntax error"),
	E("syntax_unterminated_quote", BASE "prompt: {system: \"abc}\n",
	  QERR_FORMAT, "4:1", "found unexpected end of stream"),
	E("tab_indent", BASE "kv:\n\tblocks: 3\n", QERR_FORMAT, "4:1",
	  "tab character used for indentation"),
	E("tab_after_spaces", BASE "kv:\n  \tblocks: 3\n", QERR_FORMAT, "4:3",
	  "tab character used for indentation"),
	E("tab_continuation", BASE "kv:\n  blocks: 3\n\tdtype: f32\n",
	  QERR_FORMAT, "5:1", "tab character used for indentation"),
	E("empty_file", "", QERR_MISSING, "1:1", "empty configuration"),
	E("comments_only", "# nothing here\n\n", QERR_MISSING, "1:1",
	  "empty configuration"),
	E("empty_document", "---\n", QERR_MISSING, "1:1",
	  "empty configuration"),
	E("root_sequence", "- model\n- cluster\n", QERR_FORMAT, "1:1",
	  "the configuration must be a mapping, got a sequence"),
	E("root_scalar", "hello\n", QERR_FORMAT, "1:1",
	  "the configuration must be a mapping, got 'hello'"),
	E("multiple_documents", BASE "---\nkv: {}\n", QERR_FORMAT, "3:1",
	  "a second YAML document"),
	E("document_end_then_more", BASE "...\n---\nkv: {}\n", QERR_FORMAT,
	  "4:1", "a second YAML document"),
	E("anchor", BASE "kv: &k {blocks: 3}\n", QERR_UNSUPPORTED, "3:5",
	  "anchors ('&k') are not allowed"),
	E("alias", BASE "kv: *k\n", QERR_UNSUPPORTED, "3:5",
	  "aliases ('*k') are not allowed"),
	E("billion_laughs",
	  "a: &a [\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	  "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
	  "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
	  QERR_UNSUPPORTED, "1:4", "anchors ('&a')"),
	E("anchor_on_key", BASE "&x kv: {}\n", QERR_UNSUPPORTED, "3:1",
	  "anchors ('&x')"),
	E("explicit_tag", BASE "kv: {blocks: !!int 3}\n", QERR_UNSUPPORTED,
	  "3:14", "explicit tags ('tag:yaml.org,2002:int')"),
	E("local_tag", BASE "kv: !cfg {blocks: 3}\n", QERR_UNSUPPORTED, "3:5",
	  "explicit tags ('!cfg')"),
	E("depth_17", BASE "kv: [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]\n",
	  QERR_FORMAT, "3:20", "nesting deeper than 16 levels"),
	E("depth_17_block", BASE "kv:\n a:\n  b:\n   c:\n    d:\n     e:\n"
	  "      f:\n       g:\n        h:\n         i:\n          j:\n"
	  "           k:\n            l:\n             m:\n              n:\n"
	  "               o:\n                p:\n                 q: 1\n",
	  QERR_FORMAT, "19:17", "nesting deeper than 16 levels"),
	E("depth_16_is_read", BASE "kv: [[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]\n",
	  QERR_FORMAT, "3:5", "'kv' must be a mapping, got a sequence"),
	EL("non_utf8", BASE "prompt: {system: \"caf\xe9\"}\n", QERR_FORMAT,
	   "3:23", "not valid UTF-8: invalid trailing UTF-8 octet (byte 0x22)"),
	EL("non_utf8_column_counts_chars",
	   BASE "prompt: {system: \"\xc3\xa9\xc3\xa9\xff\"}\n", QERR_FORMAT,
	   "3:21", "not valid UTF-8: invalid leading UTF-8 octet (byte 0xff)"),
	EL("utf16_bom", "\xff\xfem\0o\0", QERR_FORMAT, "1:1",
	   "not valid UTF-8"),
	EL("utf8_bom_then_error", "\xef\xbb\xbfkvv: 1\n", QERR_FORMAT, "1:1",
	   "unknown key 'kvv' at top level"),
	EL("bom_twice", "\xef\xbb\xbf\xef\xbb\xbf" BASE, QERR_FORMAT, "2:1",
	   "YAML syntax error"),
	EL("nul_byte", BASE "kv: {blocks: 3}\0\n", QERR_FORMAT, "3:16",
	   "invalid character: control characters are not allowed"),
	E("complex_key", BASE "? [a, b]\n: 1\n", QERR_FORMAT, "3:3",
	  "mapping keys must be scalars, not sequences"),
	E("complex_key_mapping", BASE "kv: {{a: 1}: 2}\n", QERR_FORMAT, "3:6",
	  "mapping keys must be scalars, not mappings"),
	/* keys */
	E("unknown_key", BASE "kv:\n  blcok_tokens: 8\n", QERR_FORMAT, "4:3",
	  "unknown key 'blcok_tokens' in 'kv' (expected: block_tokens, "
	  "blocks, dtype, free_windows)"),
	E("unknown_top_key", BASE "kvv: {}\n", QERR_FORMAT, "3:1",
	  "unknown key 'kvv' at top level (expected: model, cluster, "
	  "coordinator, security, kv, sampling, prompt, limits, heartbeat, "
	  "workers, prefix_cache, http)"),
	E("unknown_key_case", BASE "kv: {Blocks: 3}\n", QERR_FORMAT, "3:6",
	  "unknown key 'Blocks' in 'kv'"),
	E("duplicate_key", BASE "kv:\n  blocks: 3\n  blocks: 4\n", QERR_FORMAT,
	  "5:3", "duplicate key 'blocks' in 'kv' (first at 4:3)"),
	E("duplicate_quoted_key", BASE "kv: {blocks: 3, \"blocks\": 4}\n",
	  QERR_FORMAT, "3:17", "duplicate key 'blocks' in 'kv' (first at 3:6)"),
	E("duplicate_section", BASE "kv: {}\nkv: {}\n", QERR_FORMAT, "4:1",
	  "duplicate key 'kv' at top level (first at 3:1)"),
	E("duplicate_required", BASE "cluster: {name: d}\n", QERR_FORMAT,
	  "3:1", "duplicate key 'cluster' at top level (first at 2:1)"),
	/* missing */
	E("missing_model", "cluster: {name: c}\n", QERR_MISSING, "1:1",
	  "missing required key 'model' at top level"),
	E("missing_cluster", "\n\nmodel:\n  path: m\n", QERR_MISSING, "3:1",
	  "missing required key 'cluster' at top level"),
	E("missing_path", "model: {}\ncluster: {name: c}\n", QERR_MISSING,
	  "1:8", "missing required key 'path' in 'model'"),
	E("missing_name_block", "model: {path: m}\ncluster:\n  x: 1\n",
	  QERR_FORMAT, "3:3", "unknown key 'x' in 'cluster' (expected: name)"),
	E("missing_name_null_section", "model: {path: m}\ncluster:\n",
	  QERR_MISSING, "2:1", "missing required key 'name' in 'cluster'"),
	E("null_path", "model: {path: ~}\ncluster: {name: c}\n", QERR_FORMAT,
	  "1:15", "model.path: expected a string, got an empty value"),
	E("empty_path", "model: {path: ''}\ncluster: {name: c}\n",
	  QERR_FORMAT, "1:15", "model.path: path must not be empty"),
	/* types */
	E("string_for_int", BASE "kv:\n  blocks: many\n", QERR_FORMAT, "4:11",
	  "kv.blocks: expected a decimal integer, got 'many'"),
	E("quoted_int", BASE "kv: {blocks: \"16\"}\n", QERR_FORMAT, "3:14",
	  "kv.blocks: expected an integer, got a quoted string \"16\""),
	E("mapping_for_int", BASE "kv:\n  blocks: {a: 1}\n", QERR_FORMAT,
	  "4:11", "kv.blocks: expected an integer, got a mapping"),
	E("sequence_for_int", BASE "kv:\n  blocks:\n    - 1\n", QERR_FORMAT,
	  "5:5", "kv.blocks: expected an integer, got a sequence"),
	E("null_for_int", BASE "kv:\n  blocks:\n", QERR_FORMAT, "4:10",
	  "kv.blocks: expected an integer, got an empty value"),
	E("float_for_int", BASE "kv: {blocks: 1.5}\n", QERR_FORMAT, "3:14",
	  "kv.blocks: expected an integer, got a float '1.5'"),
	E("exponent_for_int", BASE "limits: {max_n: 1e3}\n", QERR_FORMAT,
	  "3:17", "limits.max_n: expected an integer, got a float '1e3'"),
	E("hex_int", BASE "kv: {blocks: 0x10}\n", QERR_FORMAT, "3:14",
	  "expected a decimal integer, got '0x10'"),
	E("octal_looking_int", BASE "kv: {blocks: 010}\n", QERR_FORMAT, "3:14",
	  "expected a decimal integer without leading zeros, got '010'"),
	E("underscore_int", BASE "kv: {blocks: 1_000}\n", QERR_FORMAT, "3:14",
	  "expected a decimal integer, got '1_000'"),
	E("sign_only", BASE "kv: {blocks: -}\n", QERR_FORMAT, "3:14",
	  "expected a decimal integer, got '-'"),
	E("string_for_float", BASE "sampling: {temperature: warm}\n",
	  QERR_FORMAT, "3:25",
	  "sampling.temperature: expected a number, got 'warm'"),
	E("nan_for_float", BASE "sampling: {temperature: nan}\n", QERR_FORMAT,
	  "3:25", "expected a number, got 'nan'"),
	E("yaml_inf_for_float", BASE "sampling: {top_p: .inf}\n", QERR_FORMAT,
	  "3:19", "expected a number, got '.inf'"),
	E("hex_float", BASE "sampling: {top_p: 0x1p-1}\n", QERR_FORMAT, "3:19",
	  "expected a number"),
	E("float_trailing_garbage", BASE "sampling: {top_p: 0.5.1}\n",
	  QERR_FORMAT, "3:19", "expected a number, got '0.5.1'"),
	E("quoted_float", BASE "sampling: {top_p: '0.5'}\n", QERR_FORMAT,
	  "3:19", "expected a number, got a quoted string \"0.5\""),
	E("bool_word", BASE "security: {curve: maybe}\n", QERR_FORMAT, "3:19",
	  "security.curve: expected a boolean (true, false, yes, no), got "
	  "'maybe'"),
	E("bool_number", BASE "security: {curve: 1}\n", QERR_FORMAT, "3:19",
	  "expected a boolean"),
	E("bool_quoted", BASE "security: {curve: \"true\"}\n", QERR_FORMAT,
	  "3:19", "expected a boolean (true, false, yes, no), got a quoted "
	  "string \"true\""),
	E("bool_on", BASE "security: {curve: on}\n", QERR_FORMAT, "3:19",
	  "expected a boolean"),
	E("mapping_for_string", BASE "prompt:\n  system:\n    a: b\n",
	  QERR_FORMAT, "5:5", "prompt.system: expected a string, got a mapping"),
	E("section_scalar", BASE "kv: 3\n", QERR_FORMAT, "3:5",
	  "'kv' must be a mapping, got '3'"),
	E("section_sequence", BASE "limits:\n  - max_n\n", QERR_FORMAT, "4:3",
	  "'limits' must be a mapping, got a sequence"),
	E("unknown_template", BASE "prompt: {template: vicuna}\n", QERR_FORMAT,
	  "3:20", "prompt.template: unknown template 'vicuna' (known: chatml,"),
	E("think_yes", BASE "prompt: {think: yes}\n", QERR_FORMAT, "3:17",
	  "prompt.think: expected on or off, got 'yes'"),
	E("effort_bad", BASE "prompt: {reasoning_effort: max}\n", QERR_FORMAT,
	  "3:28", "prompt.reasoning_effort: expected low, medium, high, got "
	  "'max'"),
	E("effort_and_think", BASE "prompt: {think: on, reasoning_effort: "
	  "low}\n", QERR_FORMAT, "3:39", "not together with prompt.think"),
	E("nul_in_string", BASE "prompt: {system: \"a\\0b\"}\n", QERR_FORMAT,
	  "3:18", "prompt.system: string contains a NUL character"),
	/* the sampling words and rules too: not cut at the NUL */
	E("nul_in_answer", BASE "sampling: {answer: \"auto\\0junk\"}\n",
	  QERR_FORMAT, "3:20", "sampling.answer: string contains a NUL "
	  "character"),
	E("nul_in_logit_bias", BASE "sampling: {logit_bias: \"1:5\\0,2:zz\"}\n",
	  QERR_FORMAT, "3:24", "sampling.logit_bias: string contains a NUL "
	  "character"),
	E("nul_in_key", BASE "kv: {\"blocks\\0\": 1}\n", QERR_FORMAT, "3:6",
	  "unknown key 'blocks?' in 'kv'"),
	/* ranges */
	E("negative", BASE "kv: {blocks: -3}\n", QERR_RANGE, "3:14",
	  "kv.blocks: must be in 1..16777216, got -3"),
	E("negative_unbounded", BASE "limits: {max_n: -3}\n", QERR_RANGE,
	  "3:17", "limits.max_n: must be >= 1, got -3"),
	E("zero_where_one", BASE "kv: {block_tokens: 0}\n", QERR_RANGE, "3:20",
	  "kv.block_tokens: must be in 1..4096, got 0"),
	E("above_max", BASE "kv: {block_tokens: 4097}\n", QERR_RANGE, "3:20",
	  "kv.block_tokens: must be in 1..4096, got 4097"),
	E("above_int", BASE "limits: {max_n: 2147483648}\n", QERR_RANGE,
	  "3:17", "limits.max_n: must be in 1..2147483647, got 2147483648"),
	/* a worker's pool ids its blocks in 24 bits */
	E("above_pool", BASE "kv: {blocks: 16777217}\n", QERR_RANGE, "3:14",
	  "kv.blocks: must be in 1..16777216, got 16777217"),
	E("int64_overflow", BASE "kv: {blocks: 9223372036854775808}\n",
	  QERR_RANGE, "3:14", "kv.blocks: integer '9223372036854775808' "
	  "overflows"),
	E("uint64_overflow", BASE "kv: {blocks: 99999999999999999999999}\n",
	  QERR_RANGE, "3:14", "overflows"),
	E("seed_overflow", BASE "sampling: {seed: 18446744073709551616}\n",
	  QERR_RANGE, "3:18", "sampling.seed: integer '18446744073709551616' "
	  "overflows"),
	E("seed_negative", BASE "sampling: {seed: -1}\n", QERR_RANGE, "3:18",
	  "sampling.seed = -1: must be an integer in 0..18446744073709551615"),
	E("temperature_negative", BASE "sampling: {temperature: -0.1}\n",
	  QERR_RANGE, "3:25",
	  "sampling.temperature = -0.1: must be a finite number >= 0"),
	E("temperature_huge", BASE "sampling: {temperature: 1e39}\n",
	  QERR_RANGE, "3:25",
	  "sampling.temperature = 1e+39: must be a finite number >= 0"),
	E("top_p_negative", BASE "sampling: {top_p: -0.5}\n", QERR_RANGE,
	  "3:19", "sampling.top_p = -0.5: must be a number in [0, 1]"),
	E("top_p_above_one", BASE "sampling: {top_p: 1.01}\n", QERR_RANGE,
	  "3:19", "sampling.top_p = 1.01: must be a number in [0, 1]"),
	E("top_k_negative", BASE "sampling: {top_k: -1}\n", QERR_RANGE, "3:19",
	  "sampling.top_k = -1: must be an integer in 0..16777216"),
	E("top_k_over", BASE "sampling: {top_k: 16777217}\n", QERR_RANGE,
	  "3:19", "sampling.top_k = 16777217: must be an integer in "
	  "0..16777216"),
	E("max_new_zero", BASE "sampling: {max_new_tokens: 0}\n", QERR_RANGE,
	  "3:28", "sampling.max_new_tokens = 0: must be an integer in "
	  "1..1048576"),
	E("stop_unknown", BASE "sampling: {stop: median}\n", QERR_FORMAT,
	  "3:18", "sampling.stop = median: must be none, exact, beta[:T] with "
	  "T in (0.5, 1) or window[:W] with W in 1..65536"),
	E("max_new_over", BASE "sampling: {max_new_tokens: 1048577}\n",
	  QERR_RANGE, "3:28", "sampling.max_new_tokens = 1048577: must be an "
	  "integer in 1..1048576"),
	E("dtype_unknown", BASE "kv: {dtype: bf16}\n", QERR_RANGE, "3:13",
	  "kv.dtype: 'bf16' is not a KV dtype (expected: f16, f32, q8_0)"),
	E("dtype_q4", BASE "kv: {dtype: q4}\n", QERR_RANGE, "3:13",
	  "kv.dtype: 'q4' is not a KV dtype (expected: f16, f32, q8_0)"),
	E("dtype_q8_0_longer", BASE "kv: {dtype: q8_0x}\n", QERR_RANGE,
	  "3:13", "kv.dtype: 'q8_0x' is not a KV dtype"),
	E("message_bytes_small", BASE "limits: {max_message_bytes: 100}\n",
	  QERR_RANGE, "3:29", "must be in 1024..1073741824, got 100"),
	E("copy_step_zero", BASE "limits: {copy_step_timeout_ms: 0}\n",
	  QERR_RANGE, "3:32", "limits.copy_step_timeout_ms: must be >= 1, got 0"),
	E("workers_local_many", BASE "workers: {local: 257}\n", QERR_RANGE,
	  "3:18", "workers.local: must be in 0..256, got 257"),
	E("workers_local_negative", BASE "workers: {local: -1}\n", QERR_RANGE,
	  "3:18", "workers.local: must be in 0..256, got -1"),
	E("threads_zero", BASE "workers: {threads: 0}\n", QERR_RANGE, "3:20",
	  "workers.threads: must be in 1..1024"),
	E("liveness_zero", BASE "heartbeat: {liveness: 0}\n", QERR_RANGE,
	  "3:23", "heartbeat.liveness: must be >= 1, got 0"),
	E("prefix_entries_negative", BASE "prefix_cache: {entries: -5}\n",
	  QERR_RANGE, "3:25", "prefix_cache.entries: must be in 0..1048576"),
	E("http_listen_no_port", BASE "http: {listen: '127.0.0.1'}\n",
	  QERR_FORMAT, "3:16", "http.listen: '127.0.0.1' is not HOST:PORT"),
	E("http_listen_port_range", BASE "http: {listen: '127.0.0.1:65536'}\n",
	  QERR_FORMAT, "3:16", "is not HOST:PORT"),
	E("http_listen_hostname", BASE "http: {listen: 'localhost:80'}\n",
	  QERR_FORMAT, "3:16", "is not HOST:PORT"),
	E("http_listen_v6_unbracketed", BASE "http: {listen: '::1:80'}\n",
	  QERR_FORMAT, "3:16", "is not HOST:PORT"),
	E("http_body_small", BASE "http:\n  max_body_bytes: 10\n", QERR_RANGE,
	  "4:19", "http.max_body_bytes"),
	E("http_unknown", BASE "http:\n  port: 80\n", QERR_FORMAT, "4:3",
	  "unknown key 'port' in 'http' (expected: listen, api_keys_file, "
	  "client_key_file, max_body_bytes, max_connections, max_in_flight, "
	  "max_json_values, max_json_depth, samples, model_aliases, "
	  "header_timeout_ms, body_timeout_ms, max_connections_per_ip, "
	  "threads, admin_keys_file, show_questions)"),
	E("http_json_depth_small", BASE "http:\n  max_json_depth: 1\n",
	  QERR_RANGE, "4:19", "http.max_json_depth"),
	E("http_header_timeout_small", BASE "http:\n  header_timeout_ms: 5\n",
	  QERR_RANGE, "4:22", "http.header_timeout_ms"),
	E("http_threads_big", BASE "http:\n  threads: 1000\n",
	  QERR_RANGE, "4:12", "http.threads"),
	E("http_show_questions", BASE "http:\n  show_questions: 2\n",
	  QERR_FORMAT, "4:19", "http.show_questions"),
	/* strings with a shape */
	E("name_space", "model: {path: m}\ncluster: {name: 'a b'}\n",
	  QERR_FORMAT, "2:17",
	  "cluster.name: 'a b' must be 1..32 characters from [A-Za-z0-9_-]"),
	E("name_too_long",
	  "model: {path: m}\ncluster: {name: abcdefghijabcdefghijabcdefghijabc}\n",
	  QERR_FORMAT, "2:17", "must be 1..32 characters"),
	E("name_slash", "model: {path: m}\ncluster: {name: a/b}\n",
	  QERR_FORMAT, "2:17", "must be 1..32 characters"),
	E("name_empty_quoted", "model: {path: m}\ncluster: {name: \"\"}\n",
	  QERR_FORMAT, "2:17", "must be 1..32 characters"),
	E("endpoint_scheme", BASE "coordinator: {client_endpoint: http://x}\n",
	  QERR_FORMAT, "3:32",
	  "coordinator.client_endpoint: 'http://x' is not an endpoint"),
	E("endpoint_space", BASE "coordinator:\n  worker_endpoint: \"tcp://a b\"\n",
	  QERR_FORMAT, "4:20", "is not an endpoint"),
	E("endpoint_bare_scheme", BASE "coordinator: {client_endpoint: tcp://}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	/* a port outside 1..65535 was taken modulo 2^16 by zmq (-5 listened
	 * on 65531, 99999 on 34463) or as "any" (0: a random port) */
	E("endpoint_port_negative",
	  BASE "coordinator: {client_endpoint: \"tcp://127.0.0.1:-5\"}\n",
	  QERR_FORMAT, "3:32", "coordinator.client_endpoint: "
	  "'tcp://127.0.0.1:-5' is not an endpoint (tcp://HOST:PORT with "
	  "PORT 1..65535"),
	E("endpoint_port_big",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1:99999\"}\n",
	  QERR_FORMAT, "3:32", "coordinator.worker_endpoint: "
	  "'tcp://127.0.0.1:99999' is not an endpoint"),
	E("endpoint_port_zero",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1:0\"}\n",
	  QERR_FORMAT, "3:32", "'tcp://127.0.0.1:0' is not an endpoint"),
	E("endpoint_port_65536",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1:65536\"}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	E("endpoint_port_word",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1:http\"}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	E("endpoint_port_star",
	  BASE "coordinator: {worker_endpoint: \"tcp://*:*\"}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	E("endpoint_port_leading_zero",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1:07701\"}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	E("endpoint_no_port",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1\"}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	E("endpoint_port_only",
	  BASE "coordinator: {worker_endpoint: \"tcp://:7701\"}\n",
	  QERR_FORMAT, "3:32", "is not an endpoint"),
	E("keys_not_list", BASE "security: {client_keys: abc}\n", QERR_FORMAT,
	  "3:25", "security.client_keys: expected a list of Z85 keys or key "
	  "files, got 'abc'"),
	E("keys_item_mapping", BASE "security: {client_keys: [{a: b}]}\n",
	  QERR_FORMAT, "3:26", "security.client_keys[0]: expected a Z85 key or "
	  "a key file path, got a mapping"),
	E("keys_ids_unknown_field",
	  BASE "security: {worker_keys: [{key: w.pub, id: w1}]}\n",
	  QERR_FORMAT, "3:39", "security.worker_keys[0]: unknown field 'id' "
	  "(an entry is a key, or {key: K, ids: [ID, ...]})"),
	/* the last of a duplicate was taken unsaid */
	E("keys_ids_duplicate_key",
	  BASE "security: {worker_keys: [{key: a.pub, ids: [w1], key: b.pub}]}\n",
	  QERR_FORMAT, "3:50", "security.worker_keys[0]: duplicate key 'key' "
	  "(first at 3:27)"),
	E("keys_ids_duplicate_ids",
	  BASE "security:\n  worker_keys:\n    - key: w.pub\n      ids: [w1]\n"
	  "      ids: [w2]\n",
	  QERR_FORMAT, "7:7", "security.worker_keys[0]: duplicate key 'ids' "
	  "(first at 6:7)"),
	E("keys_ids_missing", BASE "security: {worker_keys: [{key: w.pub}]}\n",
	  QERR_FORMAT, "3:26", "security.worker_keys[0]: a mapping entry needs "
	  "both key and ids"),
	E("keys_ids_empty",
	  BASE "security: {worker_keys: [{key: w.pub, ids: []}]}\n",
	  QERR_FORMAT, "3:44", "security.worker_keys[0].ids: expected a "
	  "non-empty list of worker ids, got an empty list"),
	E("keys_ids_bad_id",
	  BASE "security: {worker_keys: [{key: w.pub, ids: [w1, 'a b']}]}\n",
	  QERR_FORMAT, "3:49", "security.worker_keys[0].ids[1]: a worker id is "
	  "1..63 of [A-Za-z0-9_.-], got a quoted string \"a b\""),
	E("keys_ids_bad_key",
	  BASE "security: {worker_keys: [{key: '', ids: [w1]}]}\n",
	  QERR_FORMAT, "3:32", "security.worker_keys[0]: expected a Z85 key or "
	  "a key file path, got an empty string"),
	E("keys_item_empty", BASE "security: {worker_keys: [k.pub, '']}\n",
	  QERR_FORMAT, "3:33", "security.worker_keys[1]: expected a Z85 key or "
	  "a key file path, got an empty string"),
	E("z85_short", BASE "security:\n  client_keys:\n"
	  "    - \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\"\n",
	  QERR_FORMAT, "5:7",
	  "security.client_keys[0]: looks like a Z85 key but has 39 characters"),
	E("z85_long", BASE "security:\n  client_keys:\n"
	  "    - \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf77\"\n",
	  QERR_FORMAT, "5:7", "has 41 characters (Z85 keys have 40)"),
	E("z85_group_overflow", BASE "security:\n  client_keys:\n"
	  "    - \"########################################\"\n",
	  QERR_FORMAT, "5:7", "not a valid Z85 key"),
	/* cross-field rules */
	E("n_above_max_n", BASE "sampling: {n: 65}\n", QERR_RANGE, "3:15",
	  "sampling.n = 65: over this cluster's limits.max_n (64)"),
	E("max_n_below_default_n", BASE "limits: {max_n: 4}\n", QERR_RANGE,
	  "3:17", "sampling.n = 8: over this cluster's limits.max_n (4)"),
	/* the gateway's default n: each request without one was refused */
	E("http_samples_above_max_n", BASE "http: {samples: 1000}\n",
	  QERR_RANGE, "3:17", "http.samples = 1000: over this cluster's "
	  "limits.max_n (64)"),
	E("max_n_below_http_samples", BASE "sampling: {n: 2}\nhttp: "
	  "{samples: 9}\nlimits: {max_n: 4}\n", QERR_RANGE, "4:17",
	  "http.samples = 9: over this cluster's limits.max_n (4)"),
	/* admin keys without api keys: quorum serve refused the config that
	 * --check-config had passed */
	E("admin_keys_without_api_keys", BASE "http: {admin_keys_file: "
	  "adm}\n", QERR_FORMAT, "3:25", "http.admin_keys_file needs "
	  "http.api_keys_file (without keys nobody is told apart)"),
	E("reconnect_inverted",
	  BASE "heartbeat: {reconnect_min_ms: 5000, reconnect_max_ms: 10}\n",
	  QERR_RANGE, "3:55", "heartbeat.reconnect_max_ms (10) is below "
	  "reconnect_min_ms (5000)"),
	E("same_endpoints",
	  BASE "coordinator: {worker_endpoint: \"tcp://127.0.0.1:7700\"}\n",
	  QERR_RANGE, "3:32", "coordinator.worker_endpoint must differ from "
	  "client_endpoint"),
	/* one port under two spellings, one of them every address: the
	 * second bind had failed only at start */
	E("same_port_any_address",
	  BASE "coordinator: {worker_endpoint: \"tcp://0.0.0.0:7700\"}\n",
	  QERR_RANGE, "3:32", "coordinator.worker_endpoint must differ from "
	  "client_endpoint ('tcp://127.0.0.1:7700'; a port bound on every "
	  "address"),
	E("curve_without_anything", BASE "security:\n  curve: true\n",
	  QERR_MISSING, "4:10",
	  "security.curve is true but security.server_public_key_file is not set"),
	E("curve_without_client_keys",
	  BASE "security:\n  curve: yes\n  server_public_key_file: s.pub\n"
	  "  server_secret_key_file: s.key\n  worker_keys: [w.pub]\n",
	  QERR_MISSING, "4:10", "security.client_keys is empty: refusing to "
	  "start without an allowlist"),
	E("curve_without_worker_keys",
	  BASE "security:\n  curve: yes\n  server_public_key_file: s.pub\n"
	  "  server_secret_key_file: s.key\n  client_keys: [c.pub]\n"
	  "  worker_keys: []\n",
	  QERR_MISSING, "4:10", "security.worker_keys is empty"),
	E("curve_local_without_worker_pub",
	  BASE "security:\n  curve: yes\n  server_public_key_file: s.pub\n"
	  "  server_secret_key_file: s.key\n  client_keys: [c.pub]\n"
	  "  worker_keys: [w.pub]\nworkers: {local: 2}\n",
	  QERR_MISSING, "4:10", "security.curve is true and workers.local is "
	  "2 but security.worker_public_key_file is not set"),
	E("curve_local_without_worker_secret",
	  BASE "security:\n  curve: yes\n  server_public_key_file: s.pub\n"
	  "  server_secret_key_file: s.key\n  client_keys: [c.pub]\n"
	  "  worker_keys: [w.pub]\n  worker_public_key_file: w.pub\n"
	  "workers: {local: 1}\n",
	  QERR_MISSING, "4:10", "security.worker_secret_key_file is not set"),
	E("worker_key_file_not_string",
	  BASE "security:\n  worker_secret_key_file: [a]\n",
	  QERR_FORMAT, "4:27", "security.worker_secret_key_file"),
};

static void test_errors(void **state)
{
	int failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(ecases) / sizeof(ecases[0]); i++) {
		const struct ecase *t = &ecases[i];
		size_t len = t->len ? t->len : strlen(t->yaml);
		char prefix[64];
		cfg *c = (cfg *)&failed; /* must be reset to NULL */
		const char *d;
		int rc;

		rc = cfg_parse("t.yaml", t->yaml, len, &c);
		d = qerr_detail();
		snprintf(prefix, sizeof(prefix), "t.yaml:%s: ", t->where);
		if (rc != t->code || c != NULL ||
		    strncmp(d, prefix, strlen(prefix)) || !strstr(d, t->msg)) {
			print_error("case %s: rc %d (want %d), detail '%s'\n"
				    "  want prefix '%s' and '%s'\n",
				    t->name, rc, t->code, d, prefix, t->msg);
			failed++;
		}
		cfg_free(&c);
	}
	assert_int_equal(failed, 0);
}

/* The sampling defaults against a model: what the file alone cannot
 * tell, refused naming the key, the value and the model's limit. */
static void test_check_model(void **state)
{
	static const char y[] = BASE "sampling: {max_new_tokens: 1024, "
				"logit_bias: \"5:1,808:-2\"}\n";
	cfg *c = NULL;

	(void)state;
	assert_int_equal(cfg_parse("t.yaml", y, sizeof(y) - 1, &c), 0);
	assert_int_equal(cfg_check_model(c, 1024, 809), 0);
	assert_int_equal(cfg_check_model(c, 1023, 809), QERR_RANGE);
	assert_string_equal(qerr_detail(), "t.yaml:3:28: "
			    "sampling.max_new_tokens = 1024: "
			    "over the model's context (1023 tokens)");
	assert_int_equal(cfg_check_model(c, 1024, 808), QERR_RANGE);
	assert_string_equal(qerr_detail(), "t.yaml:3:46: "
			    "sampling.logit_bias: token 808 "
			    "is not in the model's vocabulary (808 tokens)");
	cfg_free(&c);
	/* a default the file leaves: its name alone */
	assert_int_equal(cfg_parse("u.yaml", BASE, sizeof(BASE) - 1, &c), 0);
	assert_int_equal(cfg_check_model(c, 10, 809), QERR_RANGE);
	assert_non_null(strstr(qerr_detail(), "u.yaml: "
			       "sampling.max_new_tokens = "));
	cfg_free(&c);
}

static void test_too_large(void **state)
{
	size_t len = CFG_MAX_BYTES + 1;
	char *big = malloc(len);
	cfg *c = NULL;

	(void)state;
	assert_non_null(big);
	memset(big, '#', len); /* a comment: valid YAML, refused unread */
	assert_int_equal(cfg_parse("big.yaml", big, len, &c), QERR_RANGE);
	assert_null(c);
	assert_string_equal(qerr_detail(),
			    "big.yaml:1:1: file is 1048577 bytes, larger than "
			    "the 1048576-byte (1 MiB) limit");
	/* exactly the limit is read */
	memcpy(big, BASE, strlen(BASE));
	assert_int_equal(cfg_parse("big.yaml", big, CFG_MAX_BYTES, &c), 0);
	cfg_free(&c);
	free(big);
}

/* ---- valid files ---------------------------------------------------------- */

static void test_defaults(void **state)
{
	cfg d, *c = NULL;

	(void)state;
	cfg_defaults(&d);
	assert_null(d.model.path);
	assert_string_equal(d.cluster.name, "");
	assert_string_equal(d.coordinator.client_endpoint,
			    "tcp://127.0.0.1:7700");
	assert_string_equal(d.coordinator.worker_endpoint,
			    "tcp://127.0.0.1:7701");
	assert_false(d.security.curve);
	assert_null(d.security.server_public_key_file);
	assert_null(d.security.client_keys);
	assert_int_equal(d.security.n_client_keys, 0);
	assert_int_equal(d.kv.block_tokens, 16);
	assert_int_equal(d.kv.blocks, 4096);
	assert_int_equal(d.kv.dtype, CFG_DTYPE_F16);
	assert_int_equal(d.sampling.p.n, 8);
	assert_true(d.sampling.p.sp.temperature == 0.7f);
	assert_int_equal(d.sampling.p.sp.top_k, 40);
	assert_true(d.sampling.p.sp.top_p == 0.95f);
	assert_int_equal(d.sampling.p.max_new, 256);
	assert_true(d.sampling.p.seed == 0);
	/* early stopping that never changes an answer, as in one process */
	assert_int_equal(d.sampling.p.stop.kind, STOP_EXACT);
	assert_null(d.sampling.stop_name);
	assert_null(d.prompt.system);
	assert_int_equal(d.limits.max_n, 64);
	assert_int_equal(d.limits.max_prompt_tokens, 4096);
	assert_int_equal(d.limits.queue_depth, 128);
	assert_int_equal(d.limits.request_timeout_ms, 120000);
	assert_int_equal(d.limits.copy_step_timeout_ms, 60000);
	assert_true(d.limits.max_message_bytes == 16 << 20);
	assert_int_equal(d.heartbeat.interval_ms, 1000);
	assert_int_equal(d.heartbeat.liveness, 3);
	assert_int_equal(d.heartbeat.reconnect_min_ms, 1000);
	assert_int_equal(d.heartbeat.reconnect_max_ms, 32000);
	assert_int_equal(d.workers.local, 0);
	assert_int_equal(d.workers.threads, 1);
	assert_int_equal(d.workers.slots, 32);
	assert_int_equal(d.prefix_cache.entries, 16);

	/* the minimal file is the defaults plus the two required keys */
	assert_int_equal(cfg_parse("t.yaml", BASE, strlen(BASE), &c), 0);
	assert_string_equal(c->model.path, "m.gguf");
	assert_string_equal(c->cluster.name, "c");
	d.model.path = c->model.path;
	strcpy(d.cluster.name, "c");
	/* ... and where the file set its keys */
	assert_string_equal(c->name, "t.yaml");
	assert_non_null(c->marks);
	d.name = c->name;
	d.marks = c->marks;
	assert_memory_equal(&d, c, sizeof(d));
	cfg_free(&c);
	assert_null(c);
	cfg_free(&c); /* NULL is fine */
	cfg_free(NULL);
	/* the 8-bit KV cache */
	{
		const char *y = BASE "kv: {dtype: q8_0}\n";

		assert_int_equal(cfg_parse("t.yaml", y, strlen(y), &c), 0);
		assert_int_equal(c->kv.dtype, CFG_DTYPE_Q8_0);
		assert_string_equal(cfg_dtype_name(c->kv.dtype), "q8_0");
		cfg_free(&c);
	}
}

static void check_example(const cfg *c)
{
	const char *tail = "/build/models/qwen2.5-0.5b-q8_0.gguf";

	assert_non_null(c->model.path);
	assert_true(strlen(c->model.path) > strlen(tail));
	assert_string_equal(c->model.path + strlen(c->model.path) - strlen(tail),
			    tail);
	assert_string_equal(c->cluster.name, "demo");
	assert_string_equal(c->coordinator.client_endpoint,
			    "tcp://127.0.0.1:7700");
	assert_string_equal(c->coordinator.worker_endpoint,
			    "tcp://127.0.0.1:7701");
	assert_false(c->security.curve);
	assert_null(c->security.server_public_key_file);
	assert_null(c->security.server_secret_key_file);
	assert_null(c->security.worker_public_key_file);
	assert_null(c->security.worker_secret_key_file);
	assert_int_equal(c->security.n_client_keys, 0);
	assert_int_equal(c->security.n_worker_keys, 0);
	assert_int_equal(c->kv.block_tokens, 16);
	assert_int_equal(c->kv.blocks, 4096);
	assert_int_equal(c->kv.dtype, CFG_DTYPE_F16);
	assert_int_equal(c->sampling.p.n, 8);
	assert_true(c->sampling.p.sp.temperature == 0.7f);
	assert_int_equal(c->sampling.p.sp.top_k, 40);
	assert_true(c->sampling.p.sp.top_p == 0.95f);
	assert_int_equal(c->sampling.p.max_new, 256);
	assert_true(c->sampling.p.seed == 0);
	assert_int_equal(c->sampling.p.stop.kind, STOP_EXACT);
	assert_null(c->prompt.system);
	assert_int_equal(c->limits.max_n, 64);
	assert_int_equal(c->limits.max_prompt_tokens, 4096);
	assert_int_equal(c->limits.queue_depth, 128);
	assert_int_equal(c->limits.request_timeout_ms, 120000);
	assert_int_equal(c->limits.copy_step_timeout_ms, 60000);
	assert_true(c->limits.max_message_bytes == 16 << 20);
	assert_int_equal(c->heartbeat.interval_ms, 1000);
	assert_int_equal(c->heartbeat.liveness, 3);
	assert_int_equal(c->heartbeat.reconnect_min_ms, 1000);
	assert_int_equal(c->heartbeat.reconnect_max_ms, 32000);
	assert_int_equal(c->workers.local, 2);
	assert_int_equal(c->workers.threads, 1);
	assert_int_equal(c->workers.slots, 32);
	assert_int_equal(c->prefix_cache.entries, 16);
}

static void test_example(void **state)
{
	char cwd[PATH_MAX];
	char want[PATH_MAX + 64];
	size_t len = 0;
	char *text = tu_slurp(EXAMPLE, &len);
	cfg *c = NULL;

	(void)state;
	assert_non_null(text);
	/* from memory: relative to the name's directory, lexically */
	assert_int_equal(cfg_parse(EXAMPLE, text, len, &c), 0);
	check_example(c);
	assert_string_equal(c->model.path,
			    "config/../build/models/qwen2.5-0.5b-q8_0.gguf");
	cfg_free(&c);
	/* from the file: relative to its real directory (absolute) */
	if (cfg_load(EXAMPLE, &c))
		fail_msg("%s", qerr_detail());
	check_example(c);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want),
		 "%s/config/../build/models/qwen2.5-0.5b-q8_0.gguf", cwd);
	assert_string_equal(c->model.path, want);
	cfg_free(&c);
	free(text);
}

static void test_values(void **state)
{
	static const char y[] =
		"model:\n  path: /abs/model.gguf\n"
		"cluster:\n  name: \"Prod_cluster-1\"\n"
		"coordinator:\n  client_endpoint: ipc:///tmp/q.sock\n"
		"  worker_endpoint: tcp://*:9000\n"
		"security:\n  curve: YES\n"
		"  server_public_key_file: keys/server.pub\n"
		"  server_secret_key_file: /etc/q/server.key\n"
		"  client_keys:\n"
		"    - \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n"
		"    - alice.key\n"
		"    - ./abcdefghijabcdefghijabcdefghijabcdefghij\n"
		"  worker_keys: [\"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID\",\n"
		"                {key: w2.pub, ids: [w2, w2.b]}]\n"
		"  worker_public_key_file: keys/worker.pub\n"
		"  worker_secret_key_file: /etc/q/worker.key\n"
		"kv: {block_tokens: 4096, blocks: 1, dtype: f32}\n"
		"sampling:\n  n: 64\n  temperature: 0\n  top_k: 0\n"
		"  top_p: 1\n  max_new_tokens: 1\n"
		"  seed: 18446744073709551615\n"
		"prompt:\n  system: |\n    Be brief.\n    Box the answer.\n"
		"limits: {max_n: 64, max_prompt_tokens: 1, queue_depth: 1,\n"
		"         request_timeout_ms: 2147483647,\n"
		"         max_message_bytes: 1073741824}\n"
		"heartbeat: {interval_ms: 1, liveness: 1, reconnect_min_ms: 7,\n"
		"            reconnect_max_ms: 7}\n"
		"workers: {local: 256, threads: 1024, slots: 4096}\n"
		"prefix_cache: {entries: 0}\n";
	cfg *c = NULL;

	(void)state;
	if (cfg_parse("etc/q/cluster.yaml", y, sizeof(y) - 1, &c))
		fail_msg("%s", qerr_detail());
	assert_string_equal(c->model.path, "/abs/model.gguf");
	assert_string_equal(c->cluster.name, "Prod_cluster-1");
	assert_string_equal(c->coordinator.client_endpoint, "ipc:///tmp/q.sock");
	assert_string_equal(c->coordinator.worker_endpoint, "tcp://*:9000");
	assert_true(c->security.curve);
	assert_string_equal(c->security.server_public_key_file,
			    "etc/q/keys/server.pub");
	assert_string_equal(c->security.server_secret_key_file,
			    "/etc/q/server.key");
	assert_int_equal(c->security.n_client_keys, 3);
	assert_string_equal(c->security.client_keys[0].z85,
			    "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
	assert_null(c->security.client_keys[0].path);
	assert_string_equal(c->security.client_keys[1].z85, "");
	assert_string_equal(c->security.client_keys[1].path,
			    "etc/q/alice.key");
	assert_string_equal(c->security.client_keys[2].path,
			    "etc/q/./abcdefghijabcdefghijabcdefghijabcdefghij");
	assert_int_equal(c->security.n_worker_keys, 2);
	assert_string_equal(c->security.worker_keys[0].z85,
			    "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID");
	assert_int_equal(c->security.worker_keys[0].n_ids, 0);
	assert_string_equal(c->security.worker_keys[1].path, "etc/q/w2.pub");
	assert_int_equal(c->security.worker_keys[1].n_ids, 2);
	assert_string_equal(c->security.worker_keys[1].ids[0], "w2");
	assert_string_equal(c->security.worker_keys[1].ids[1], "w2.b");
	assert_string_equal(c->security.worker_public_key_file,
			    "etc/q/keys/worker.pub");
	assert_string_equal(c->security.worker_secret_key_file,
			    "/etc/q/worker.key");
	assert_int_equal(c->kv.block_tokens, 4096);
	assert_int_equal(c->kv.blocks, 1);
	assert_int_equal(c->kv.dtype, CFG_DTYPE_F32);
	assert_int_equal(c->sampling.p.n, 64);
	assert_true(c->sampling.p.sp.temperature == 0.0f);
	assert_int_equal(c->sampling.p.sp.top_k, 0);
	assert_true(c->sampling.p.sp.top_p == 1.0f);
	assert_int_equal(c->sampling.p.max_new, 1);
	assert_true(c->sampling.p.seed == UINT64_MAX);
	assert_string_equal(c->prompt.system, "Be brief.\nBox the answer.\n");
	assert_int_equal(c->limits.max_prompt_tokens, 1);
	assert_int_equal(c->limits.request_timeout_ms, 2147483647);
	assert_true(c->limits.max_message_bytes == 1 << 30);
	assert_int_equal(c->heartbeat.reconnect_max_ms, 7);
	assert_int_equal(c->workers.local, 256);
	assert_int_equal(c->workers.threads, 1024);
	assert_int_equal(c->workers.slots, 4096);
	assert_int_equal(c->prefix_cache.entries, 0);
	cfg_free(&c);
}

/* Accepted spellings, each against one field. */
struct vcase {
	const char *name;
	const char *yaml; /* appended to BASE */
	int (*check)(const cfg *c);
};

static int v_bool_no(const cfg *c) { return !c->security.curve; }
static int v_bool_false_caps(const cfg *c) { return !c->security.curve; }
static int v_null_section(const cfg *c) { return c->kv.blocks == 4096; }
static int v_empty_flow(const cfg *c) { return c->kv.block_tokens == 16; }
static int v_plus_int(const cfg *c) { return c->kv.blocks == 5; }
static int v_zero_int(const cfg *c) { return c->prefix_cache.entries == 0; }
static int v_int_as_float(const cfg *c) { return c->sampling.p.sp.temperature == 2.0f; }
static int v_exp_float(const cfg *c) { return c->sampling.p.sp.top_p == 0.5f; }
static int v_leading_dot(const cfg *c) { return c->sampling.p.sp.top_p == 0.5f; }
static int v_null_system(const cfg *c) { return c->prompt.system == NULL; }
static int v_quoted_system(const cfg *c)
{
	return c->prompt.system && !strcmp(c->prompt.system, "say \"hi\"");
}
static int v_template_think(const cfg *c)
{
	return !strcmp(c->prompt.template_name, "gemma") &&
	       c->prompt.think == 0;
}
static int v_think_default(const cfg *c)
{
	return !c->prompt.template_name && c->prompt.think == -1;
}
static int v_think_on(const cfg *c) { return c->prompt.think == 1; }
static int v_effort_high(const cfg *c)
{
	return c->prompt.think == PROMPT_EFFORT_HIGH;
}
static int v_null_keys(const cfg *c) { return c->security.n_client_keys == 0; }
static int v_comment_after(const cfg *c) { return c->kv.blocks == 7; }
static int v_doc_markers(const cfg *c) { return c->kv.blocks == 9; }
static int v_utf8_system(const cfg *c)
{
	return !strcmp(c->prompt.system, "caf\xc3\xa9 \xe2\x88\x91");
}

static int v_http_v6(const cfg *c)
{
	return !strcmp(c->http.listen, "[::1]:0") &&
	       c->http.max_in_flight == 3 && c->http.api_keys_file &&
	       !strcmp(c->http.api_keys_file, "keys/api");
}
static int v_http_default(const cfg *c)
{
	return !strcmp(c->http.listen, "127.0.0.1:8080") &&
	       c->http.max_body_bytes == 1 << 20 && !c->http.api_keys_file &&
	       c->http.max_json_values == 4096 &&
	       c->http.max_json_depth == 32 && c->http.samples == 0 &&
	       !c->http.model_aliases && c->http.header_timeout_ms == 10000 &&
	       c->http.body_timeout_ms == 30000 &&
	       c->http.max_connections_per_ip == 128 &&
	       c->http.max_connections == 512 && c->http.threads == 4 &&
	       !c->http.admin_keys_file && !c->http.show_questions;
}
static int v_http_front(const cfg *c)
{
	return c->http.samples == 5 && c->http.model_aliases &&
	       !strcmp(c->http.model_aliases, "gpt-4o, x") &&
	       c->http.header_timeout_ms == 2000 && c->http.threads == 2 &&
	       c->http.show_questions && c->http.max_json_values == 100;
}

static const struct vcase vcases[] = {
	{"http_v6", "http: {listen: '[::1]:0', max_in_flight: 3, "
	 "api_keys_file: keys/api}\n", v_http_v6},
	{"http_default", "http:\n", v_http_default},
	{"http_front", "http: {samples: 5, model_aliases: 'gpt-4o, x', "
	 "header_timeout_ms: 2000, threads: 2, show_questions: true, "
	 "max_json_values: 100}\n", v_http_front},
	{"bool_no", "security: {curve: no}\n", v_bool_no},
	{"bool_false_caps", "security: {curve: FALSE}\n", v_bool_false_caps},
	{"null_section", "kv:\n", v_null_section},
	{"empty_flow_section", "kv: {}\n", v_empty_flow},
	{"plus_int", "kv: {blocks: +5}\n", v_plus_int},
	{"zero_int", "prefix_cache: {entries: 0}\n", v_zero_int},
	{"int_as_float", "sampling: {temperature: 2}\n", v_int_as_float},
	{"exp_float", "sampling: {top_p: 5e-1}\n", v_exp_float},
	{"leading_dot_float", "sampling: {top_p: .5}\n", v_leading_dot},
	{"null_system", "prompt: {system: null}\n", v_null_system},
	{"quoted_system", "prompt: {system: 'say \"hi\"'}\n", v_quoted_system},
	{"template_think", "prompt: {template: gemma, think: off}\n",
	 v_template_think},
	{"think_default", "prompt: {system: x}\n", v_think_default},
	{"effort_high", "prompt: {reasoning_effort: high}\n", v_effort_high},
	{"think_on", "prompt:\n  think: \"on\"\n", v_think_on},
	{"null_keys", "security: {client_keys: ~}\n", v_null_keys},
	{"comment_after_value", "kv:\n  blocks: 7 # seven\n", v_comment_after},
	{"document_markers", "kv: {blocks: 9}\n...\n", v_doc_markers},
	{"block_indent_4", "kv:\n    blocks: 7\n", v_comment_after},
	{"utf8_string", "prompt: {system: \"caf\xc3\xa9 \xe2\x88\x91\"}\n",
	 v_utf8_system},
	{"utf8_bom", "", v_empty_flow}, /* BASE itself, see test_accepted */
	{"crlf", "kv:\r\n  blocks: 7\r\n", v_comment_after},
	{"tab_after_colon", "kv: {blocks:\t7}\n", v_comment_after},
};

static void test_accepted(void **state)
{
	int failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(vcases) / sizeof(vcases[0]); i++) {
		char y[512];
		cfg *c = NULL;

		snprintf(y, sizeof(y), "%s%s%s",
			 strcmp(vcases[i].name, "utf8_bom") ? "" : "\xef\xbb\xbf",
			 BASE, vcases[i].yaml);
		if (cfg_parse("t.yaml", y, strlen(y), &c)) {
			print_error("case %s: %s\n", vcases[i].name,
				    qerr_detail());
			failed++;
			continue;
		}
		if (!vcases[i].check(c)) {
			print_error("case %s: wrong value\n", vcases[i].name);
			failed++;
		}
		cfg_free(&c);
	}
	assert_int_equal(failed, 0);
}

/* The endpoint rule as worker --connect applies it: ports 1..65535 in
 * decimal on tcp://, the other schemes as before. */
static void test_endpoint_check(void **state)
{
	static const char *const good[] = {
		"tcp://127.0.0.1:7701", "tcp://*:1", "tcp://h:65535",
		"tcp://[::1]:7700", "tcp://quorum-coordinator:7701",
		"ipc:///tmp/q.sock", "inproc://x",
	};
	static const char *const bad[] = {
		"tcp://127.0.0.1:-5", "tcp://127.0.0.1:99999",
		"tcp://127.0.0.1:0", "tcp://127.0.0.1:65536",
		"tcp://127.0.0.1:", "tcp://127.0.0.1", "tcp://:7701",
		"tcp://h:x1", "tcp://h:1x", "tcp://*:*", "tcp://h:007",
		"http://h:1", "tcp://a b:1", "",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (cfg_endpoint_check("--connect", good[i]))
			fail_msg("%s refused: %s", good[i], qerr_detail());
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[128];

		if (cfg_endpoint_check("worker: --connect", bad[i]) !=
		    QERR_FORMAT)
			fail_msg("%s accepted", bad[i]);
		snprintf(want, sizeof(want), "worker: --connect: '%s' is not "
			 "an endpoint (tcp://HOST:PORT with PORT 1..65535",
			 bad[i]);
		if (!strstr(qerr_detail(), want))
			fail_msg("%s: detail '%s'", bad[i], qerr_detail());
	}
	assert_int_equal(cfg_endpoint_check("x", NULL), QERR_FORMAT);
}

static void test_paths(void **state)
{
	static const struct {
		const char *name, *path, *want;
	} t[] = {
		{"t.yaml", "m.gguf", "m.gguf"},
		{"./t.yaml", "m.gguf", "m.gguf"},
		{"a/b/t.yaml", "m.gguf", "a/b/m.gguf"},
		{"a/b/t.yaml", "../m.gguf", "a/b/../m.gguf"},
		{"/t.yaml", "m.gguf", "//m.gguf"},
		{"/etc/t.yaml", "/abs/m.gguf", "/abs/m.gguf"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char y[256];
		cfg *c = NULL;

		snprintf(y, sizeof(y), "model: {path: %s}\ncluster: {name: c}\n",
			 t[i].path);
		assert_int_equal(cfg_parse(t[i].name, y, strlen(y), &c), 0);
		assert_string_equal(c->model.path, t[i].want);
		cfg_free(&c);
	}
}

static void test_dump_roundtrip(void **state)
{
	static const char y[] =
		BASE "security:\n  curve: true\n  server_public_key_file: s.pub\n"
		"  server_secret_key_file: s.key\n"
		"  client_keys: [\"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\", a.key]\n"
		"  worker_keys: [w.key]\n"
		"  worker_public_key_file: w.pub\n"
		"  worker_secret_key_file: /k/w.key\n"
		"sampling: {temperature: 0.3, top_p: 0.9, seed: 12345678901234,\n"
		"  min_p: 0.05, presence_penalty: -0.5, frequency_penalty: 1.25,\n"
		"  logit_bias: \"7:0.1,3:-100\"}\n"
		"prompt: {system: \"tab\\there \\\"q\\\" back\\\\slash\\nnew\\x01\"}\n";
	cfg *a = NULL, *b = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	if (cfg_parse("t.yaml", y, sizeof(y) - 1, &a))
		fail_msg("%s", qerr_detail());
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	cfg_dump(a, f);
	fclose(f);
	if (cfg_parse("dump.yaml", buf, len, &b))
		fail_msg("%s\n%s", qerr_detail(), buf);
	assert_string_equal(a->model.path, b->model.path);
	assert_string_equal(a->prompt.system, b->prompt.system);
	assert_string_equal(b->prompt.system,
			    "tab\there \"q\" back\\slash\nnew\x01");
	assert_int_equal(b->security.n_client_keys, 2);
	assert_string_equal(b->security.client_keys[0].z85,
			    a->security.client_keys[0].z85);
	assert_string_equal(b->security.client_keys[1].path, "a.key");
	assert_string_equal(b->security.worker_keys[0].path, "w.key");
	assert_string_equal(b->security.worker_public_key_file, "w.pub");
	assert_string_equal(b->security.worker_secret_key_file, "/k/w.key");
	assert_true(b->sampling.p.sp.temperature == a->sampling.p.sp.temperature);
	assert_true(b->sampling.p.sp.top_p == a->sampling.p.sp.top_p);
	assert_true(b->sampling.p.seed == 12345678901234ull);
	assert_non_null(strstr(buf, "temperature: 0.3\n"));
	assert_non_null(strstr(buf, "logit_bias: \"3:-100,7:0.1\"\n"));
	assert_int_equal(b->sampling.p.logit_bias.n, 2);
	/* the rest is plain data: equal after swapping out the pointers */
	free(a->model.path);
	free(a->security.server_public_key_file);
	free(a->security.server_secret_key_file);
	free(a->security.worker_public_key_file);
	free(a->security.worker_secret_key_file);
	free(a->prompt.system);
	a->model.path = b->model.path;
	a->security.server_public_key_file = b->security.server_public_key_file;
	a->security.server_secret_key_file = b->security.server_secret_key_file;
	a->security.worker_public_key_file = b->security.worker_public_key_file;
	a->security.worker_secret_key_file = b->security.worker_secret_key_file;
	a->prompt.system = b->prompt.system;
	/* the places differ: the dump writes its own lines */
	free(a->name);
	free(a->marks);
	a->name = b->name;
	a->marks = b->marks;
	{
		curve_key *ck = a->security.client_keys, *wk = a->security.worker_keys;

		a->security.client_keys = b->security.client_keys;
		a->security.worker_keys = b->security.worker_keys;
		assert_memory_equal(a, b, sizeof(*a));
		free(ck[1].path);
		free(ck);
		free(wk[0].path);
		free(wk);
	}
	free(a);
	cfg_free(&b);
	free(buf);
}

/* Found by fuzz_cfg: NEL (U+0085) was dumped raw inside quotes and read
 * back as a folded line break (a space); so would U+2028 and U+2029. */
static void test_dump_line_breaks(void **state)
{
	static const char y[] =
		BASE "prompt: {system: \"a\\Nb\\Lc\\Pd\\u0080e\\u009f\"}\n";
	cfg *a = NULL, *b = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	if (cfg_parse("t.yaml", y, sizeof(y) - 1, &a))
		fail_msg("%s", qerr_detail());
	assert_string_equal(a->prompt.system, "a\xc2\x85" "b\xe2\x80\xa8"
			    "c\xe2\x80\xa9" "d\xc2\x80" "e\xc2\x9f");
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	cfg_dump(a, f);
	fclose(f);
	if (cfg_parse("dump.yaml", buf, len, &b))
		fail_msg("%s\n%s", qerr_detail(), buf);
	assert_string_equal(b->prompt.system, a->prompt.system);
	cfg_free(&a);
	cfg_free(&b);
	free(buf);
}

static void test_load_errors(void **state)
{
	char dir[256], path[300];
	cfg *c = (cfg *)dir;
	int fd;

	(void)state;
	assert_int_equal(cfg_load("/nonexistent/q.yaml", &c), QERR_IO);
	assert_null(c);
	assert_string_equal(qerr_detail(), "/nonexistent/q.yaml: cannot open: "
					   "No such file or directory");
	assert_int_equal(cfg_load("config", &c), QERR_IO);
	assert_string_equal(qerr_detail(), "config: not a regular file");
	assert_int_equal(cfg_load(NULL, &c), QERR_ARG);
	assert_int_equal(cfg_load(EXAMPLE, NULL), QERR_ARG);
	assert_int_equal(cfg_parse(NULL, "", 0, &c), QERR_ARG);
	assert_int_equal(cfg_parse("x", NULL, 5, &c), QERR_ARG);

	/* a huge (sparse) file is refused from its size, unread */
	snprintf(dir, sizeof(dir), "/tmp/test_cfg.%d", (int)getpid());
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/big.yaml", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)1 << 32), 0);
	close(fd);
	assert_int_equal(cfg_load(path, &c), QERR_RANGE);
	assert_null(c);
	assert_non_null(strstr(qerr_detail(), "big.yaml:1:1: file is 4294967296 "
					      "bytes, larger than"));
	/* errors name the path as given, with the position */
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, BASE "kv: {blocks: 0}\n",
			       strlen(BASE "kv: {blocks: 0}\n")),
			 (ssize_t)strlen(BASE "kv: {blocks: 0}\n"));
	close(fd);
	assert_int_equal(cfg_load(path, &c), QERR_RANGE);
	assert_non_null(strstr(qerr_detail(), "/big.yaml:3:14: kv.blocks:"));
	assert_true(strncmp(qerr_detail(), dir, strlen(dir)) == 0);
	unlink(path);
	/* a FIFO is refused, not waited on for a writer for ever (open
	 * blocked before the S_ISREG check): asked in a child, which is
	 * given 5 s */
	snprintf(path, sizeof(path), "%s/fifo.yaml", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	{
		pid_t pid = fork();
		int status = 0, waited = 0;

		assert_true(pid >= 0);
		if (pid == 0)
			_exit(cfg_load(path, &c) == QERR_IO && !c &&
			      strstr(qerr_detail(), "fifo.yaml: not a regular "
				     "file") ? 0 : 1);
		while (waitpid(pid, &status, WNOHANG) == 0 && waited < 5000) {
			usleep(10000);
			waited += 10;
		}
		if (waited >= 5000) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			unlink(path);
			rmdir(dir);
			fail_msg("cfg_load of a FIFO still blocks after 5 s");
		}
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	unlink(path);
	rmdir(dir);
}

/* sampling.grammar_file / json_schema_file: read at load, made the
 * grammar every request without a constraint follows; each error names
 * the key, its place and the file. */
static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static int load_with(const char *dir, const char *sampling, cfg **c)
{
	char y[512];

	snprintf(y, sizeof(y), "%s/c.yaml", dir);
	{
		char body[400];

		snprintf(body, sizeof(body), BASE "sampling:\n%s", sampling);
		put(dir, "c.yaml", body);
	}
	return cfg_load(y, c);
}

static void test_grammar_files(void **state)
{
	static const char *const files[] = {"g.gbnf", "s.json", "bad.gbnf",
					    "bad.json", "empty.gbnf", "c.yaml"};
	char dir[256], path[300], *want = NULL;
	json_t *js = json_loads("{\"type\":\"integer\"}", 0, NULL);
	cfg *c = NULL;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_cfg_g.%d", (int)getpid());
	assert_int_equal(mkdir(dir, 0700), 0);
	put(dir, "g.gbnf", "root ::= [0-9]+\n");
	put(dir, "s.json", "{\"type\":\"integer\"}");
	put(dir, "bad.gbnf", "root ::= digits\n");
	put(dir, "bad.json", "{\"type\":");
	assert_int_equal(load_with(dir, "  grammar_file: g.gbnf\n", &c), 0);
	assert_string_equal(c->sampling.p.grammar, "root ::= [0-9]+\n");
	assert_true(c->sampling.p.grammar == c->sampling.grammar);
	cfg_free(&c);
	assert_int_equal(jschema_to_gbnf(js, &want), 0);
	assert_int_equal(load_with(dir, "  json_schema_file: s.json\n", &c), 0);
	assert_string_equal(c->sampling.p.grammar, want);
	/* its samples vote on the JSON value (constrain_answer), unless
	 * sampling.answer says; a GBNF grammar keeps auto */
	assert_int_equal(c->sampling.p.answer.kind, ANSWER_JSON);
	assert_string_equal(c->sampling.p.answer.pattern, "");
	cfg_free(&c);
	assert_int_equal(load_with(dir, "  json_schema_file: s.json\n"
				   "  answer: yesno\n", &c), 0);
	assert_int_equal(c->sampling.p.answer.kind, ANSWER_YESNO);
	cfg_free(&c);
	assert_int_equal(load_with(dir, "  grammar_file: g.gbnf\n", &c), 0);
	assert_int_equal(c->sampling.p.answer.kind, ANSWER_AUTO);
	cfg_free(&c);
	free(want);
	json_decref(js);
	/* the errors */
	assert_int_not_equal(load_with(dir, "  grammar_file: g.gbnf\n"
				       "  json_schema_file: s.json\n", &c), 0);
	assert_null(c);
	assert_non_null(strstr(qerr_detail(), "c.yaml:5:21: sampling: give "
			       "grammar_file or json_schema_file, not both"));
	assert_int_not_equal(load_with(dir, "  grammar_file: none.gbnf\n", &c),
			     0);
	assert_non_null(strstr(qerr_detail(), "c.yaml:4:17: sampling."
			       "grammar_file: "));
	assert_non_null(strstr(qerr_detail(), "none.gbnf: No such file or "
			       "directory"));
	assert_int_not_equal(load_with(dir, "  grammar_file: bad.gbnf\n", &c),
			     0);
	assert_non_null(strstr(qerr_detail(), "sampling.grammar_file: "));
	assert_non_null(strstr(qerr_detail(), "digits"));
	assert_int_not_equal(load_with(dir, "  json_schema_file: bad.json\n",
				       &c), 0);
	assert_non_null(strstr(qerr_detail(), "sampling.json_schema_file: "));
	assert_non_null(strstr(qerr_detail(), "bad.json:1:"));
	/* an empty grammar is none: an empty file, or a directory (which
	 * reads as empty), constrained nothing, unsaid */
	put(dir, "empty.gbnf", "");
	assert_int_not_equal(load_with(dir, "  grammar_file: empty.gbnf\n",
				       &c), 0);
	assert_null(c);
	assert_non_null(strstr(qerr_detail(), "c.yaml:4:17: sampling."
			       "grammar_file: "));
	assert_non_null(strstr(qerr_detail(), "empty.gbnf: empty grammar"));
	assert_int_not_equal(load_with(dir, "  json_schema_file: empty.gbnf\n",
				       &c), 0);
	assert_non_null(strstr(qerr_detail(), "empty.gbnf: empty JSON "
			       "schema"));
	assert_int_equal(mkdir(strcat(strcpy(path, dir), "/d"), 0700), 0);
	assert_int_not_equal(load_with(dir, "  grammar_file: d\n", &c), 0);
	assert_non_null(strstr(qerr_detail(), "sampling.grammar_file: "));
	assert_non_null(strstr(qerr_detail(), "/d: is a directory"));
	assert_int_not_equal(load_with(dir, "  json_schema_file: d\n", &c),
			     0);
	assert_non_null(strstr(qerr_detail(), "/d: is a directory"));
	rmdir(path);
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* ---- mutations ------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_mutations(void **state)
{
	static const char specials[] = " \t\n:-[]{}&*!|>'\"%@`#,?~\\\xff\xc3\0";
	static const char *const snippets[] = {
		"&a ", "*a", "!!int ", "? ", "---\n", "...\n", "%YAML 1.1\n",
		"\n  x: 1", "\n- ", ": ", "[[[[[[[[[[[[[[[[[[", "{a: ", "\"\\0",
		"\t", "99999999999999999999", "-1", "1.5", "~", "'", "|\n",
		"\xef\xbb\xbf", "\r\n", "curve: true\n",
	};
	size_t len = 0, ok = 0, bad = 0;
	char *text = tu_slurp(EXAMPLE, &len);
	char *buf = malloc(len * 2 + 64);
	uint64_t s = 0x9e3779b97f4a7c15ull;
	const char *env = getenv("CFG_MUTATIONS"); /* longer runs by hand */
	int iters = env && atoi(env) > 0 ? atoi(env) : 5000;

	(void)state;
	assert_non_null(text);
	assert_non_null(buf);
	for (int it = 0; it < iters; it++) {
		size_t n = len;
		int edits = 1 + (int)(rng_next(&s) % 4);
		cfg *c = NULL;
		int rc;

		memcpy(buf, text, len);
		for (int e = 0; e < edits && n > 0; e++) {
			size_t at = rng_next(&s) % n;
			unsigned op = (unsigned)(rng_next(&s) % 6);
			char ch = specials[rng_next(&s) % (sizeof(specials) - 1)];

			if (op == 0) { /* replace with a special */
				buf[at] = ch;
			} else if (op == 1) { /* random byte */
				buf[at] = (char)(rng_next(&s) & 0xff);
			} else if (op == 2) { /* insert */
				memmove(buf + at + 1, buf + at, n - at);
				buf[at] = ch;
				n++;
			} else if (op == 3) { /* delete a run */
				size_t k = 1 + rng_next(&s) % 8;

				if (k > n - at)
					k = n - at;
				memmove(buf + at, buf + at + k, n - at - k);
				n -= k;
			} else if (op == 4) { /* truncate, or insert a snippet */
				const char *sn = snippets[rng_next(&s) %
							  (sizeof(snippets) /
							   sizeof(snippets[0]))];
				size_t k = strlen(sn);

				if (rng_next(&s) % 4 == 0) {
					n = at;
				} else if (n + k < len * 2) {
					memmove(buf + at + k, buf + at, n - at);
					memcpy(buf + at, sn, k);
					n += k;
				}
			} else if (n + 16 < len * 2) { /* duplicate a chunk */
				size_t k = 1 + rng_next(&s) % 16;

				if (k > n - at)
					k = n - at;
				memmove(buf + at + k, buf + at, n - at);
				n += k;
			}
		}
		rc = cfg_parse("m.yaml", buf, n, &c);
		if (rc == 0) {
			assert_non_null(c);
			ok++;
		} else {
			const char *d = qerr_detail();
			int line = 0, col = 0;

			assert_null(c);
			if (sscanf(d, "m.yaml:%d:%d: ", &line, &col) != 2 ||
			    line < 1 || col < 1 || rc <= 0 || rc >= QERR_COUNT_)
				fail_msg("iteration %d: rc %d detail '%s'", it, rc,
					 d);
			bad++;
		}
		cfg_free(&c);
	}
	print_message("mutations: %zu accepted, %zu refused\n", ok, bad);
	assert_true(bad > 0);
	free(buf);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_example),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_endpoint_check),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_dump_roundtrip),
		cmocka_unit_test(test_dump_line_breaks),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_too_large),
		cmocka_unit_test(test_check_model),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_grammar_files),
		cmocka_unit_test(test_mutations),
	};

	return cmocka_run_group_tests_name("cfg", tests, NULL, NULL);
}
