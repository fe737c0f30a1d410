/*
 * cli — the quorum command-line front end: subcommand table and helpers
 * shared by the subcommands (strict number parsing, usage errors).
 *
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` (argv[0] is the
 * subcommand name), parses its options with getopt_long, prints --help to
 * stdout, and returns the process exit status: 0 ok, 1 failure, 2 usage.
 */
#ifndef QUORUM_CLI_H
#define QUORUM_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int cmd_mkmodel(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_ask(int argc, char **argv);
int cmd_evalset(int argc, char **argv);
int cmd_vote(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Strict parsers: the whole string must be a number within [min, max].
 * On failure print "quorum CMD: bad value for OPT: 'S'" and return -1. */
int cli_long(const char *cmd, const char *opt, const char *s, long min,
	     long max, long *out);
int cli_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);
int cli_float(const char *cmd, const char *opt, const char *s, double min,
	      double max, float *out);
/* Comma-separated lists (detokenize's and eval --tokens' ids, eval-set's
 * -n counts), one rule for all: entries split at single commas, none
 * empty. An empty list or an empty entry ("1,", ",1", "1,,2": a stray
 * comma, a typo more likely than a request for fewer) is a usage error
 * naming what (e.g. "--tokens") and s. each gets every entry in order,
 * NUL-terminated; its non-zero return (after its own message) ends the
 * walk. Returns 0, 2 after a usage error, or each's return. */
int cli_list(const char *cmd, const char *what, const char *s,
	     int (*each)(const char *item, void *arg), void *arg);
/* A list of token ids (0..INT32_MAX) by cli_list's rule, appended to
 * *ids (realloc'd; *n entries, *cap allocated). Returns 0, 2 after a
 * usage error, 1 out of memory (said). */
int cli_ids(const char *cmd, const char *what, const char *s, int32_t **ids,
	    size_t *n, size_t *cap);
/* All of f (stdin) into a NUL-terminated buffer, its length in *len;
 * NULL on a read error or out of memory. */
char *cli_read_all(FILE *f, size_t *len);
/* A question given as '-': all of stdin without its trailing newlines
 * ("echo Q | quorum run -" asks "Q", as quorum run "Q" does). */
char *cli_read_question(size_t *len);
/* Long options taken whole (conf/opts.h: "--mode" is not "--model"):
 * 0, or non-zero after the usage error is printed (the command returns
 * 2). Called before a command's getopt_long loop. */
int cli_opts(const char *cmd, int argc, char *const argv[],
	     const char *optstring, const struct option *opts);
/* Prints "quorum CMD: MSG\nTry 'quorum CMD --help'." to stderr; returns 2.
 * (The sampling flags are sampflags.h's.) */
int cli_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
