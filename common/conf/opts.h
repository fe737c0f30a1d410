/*
 * opts — long options taken whole. getopt_long takes any unambiguous
 * prefix of a long option as the option ("--mode" as "--model"), so a
 * flag of another command, or a misspelt one, could silently set another
 * setting; every program checks its command line here first.
 */
#ifndef QUORUM_OPTS_H
#define QUORUM_OPTS_H

#include <getopt.h>

/* Refuses a long option of argv[1..argc) that is not one of opts
 * written whole ("--name" or "--name=VALUE") but the start of one: 0, or
 * QERR_ARG with qerr_detail() naming it and the option it starts. Values
 * of options (the word after a long option that takes one, or a short
 * option's per optstring) are skipped; "--" ends the options. Options
 * that start none are left to getopt_long to refuse. */
int opts_whole(int argc, char *const argv[], const char *optstring,
	       const struct option *opts);

#endif
