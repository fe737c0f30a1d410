/*
 * isautil — the instruction sets a cross-ISA test compares: each one this
 * CPU has and, on an AVX2 CPU without AVX-512 VNNI, that level too, run as
 * the AVX2 table with the VNNI build's integer kernels (kern_int_avx2.c
 * built with vpdpbusd emulated: tests/kern_int_emu.o, linked into the
 * tests that include this). So the VNNI code paths are checked bit for
 * bit on every AVX2 machine, and natively where the CPU has them.
 */
#ifndef QUORUM_TEST_ISAUTIL_H
#define QUORUM_TEST_ISAUTIL_H

#include "kernels/kern.h"
#include "kernels/kern_impl.h"

/* The highest level iu_use_isa may run. */
static inline int iu_last_isa(void)
{
	return kern_isa_detect() >= KERN_ISA_AVX2 ? KERN_ISA_LAST
						  : kern_isa_detect();
}

/* Selects isa (natively, or emulated as above); 0 if it cannot run here. */
static inline int iu_use_isa(int isa)
{
	static struct kern_ops emu;

	if (isa <= kern_isa_detect())
		return kern_set_isa(isa) == 0;
	if (isa != KERN_ISA_AVX512VNNI || kern_isa_detect() < KERN_ISA_AVX2)
		return 0;
	emu = kern_ops_avx2;
	emu.qmatmul = kern_vnni_emu_qmatmul;
	emu.qact = kern_vnni_emu_qact;
	emu.qact_bytes = kern_vnni_emu_qact_bytes;
	emu.pack_bytes = kern_vnni_emu_pack_bytes;
	emu.pack = kern_vnni_emu_pack;
	emu.peak_int8 = kern_vnni_emu_peak_int8;
	emu.act_row = kern_vnni_emu_act_row;
	emu.att_q8 = kern_vnni_emu_att_q8;
	kern_impl_install(isa, &emu);
	return 1;
}

static inline const char *iu_isa_label(int isa)
{
	return isa > kern_isa_detect() ? "avx512vnni (emulated)"
				       : kern_isa_name(isa);
}

#endif
