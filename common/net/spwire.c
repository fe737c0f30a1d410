/*
 * spwire — sc_params to and from SamplingParams through the two tables
 * (see spwire.h): each setting's field found by name in the message's
 * descriptor, read and written by its protobuf-c type.
 */
#include "net/spwire.h"

#include <string.h>

#include "qerr.h"

/* The field of setting id, or NULL when the message has none. */
static const ProtobufCFieldDescriptor *field_of(int id)
{
	const sc_setting *x = sc_params_setting(id);

	return x ? protobuf_c_message_descriptor_get_field_by_name(
			   &quorum__sampling_params__descriptor, x->name)
		 : NULL;
}

unsigned spwire_fields(void)
{
	unsigned m = 0;

	for (int id = 0; id < SC_S_COUNT_; id++)
		if (field_of(id))
			m |= SC_BIT(id);
	return m;
}

static void *at(const void *msg, unsigned off)
{
	return (char *)msg + off;
}

int spwire_encode(const sc_params *p, unsigned which,
		  Quorum__SamplingParams *out, spwire_buf *b)
{
	int set = 0;

	quorum__sampling_params__init(out);
	for (int id = 0; id < SC_S_COUNT_; id++) {
		const ProtobufCFieldDescriptor *f = field_of(id);
		sc_value v;

		if (!f || !(which & SC_BIT(id)))
			continue;
		sc_params_value(id, p, &v, b->text[id], sizeof(b->text[id]));
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			/* stop strings: repeated bytes */
			for (int i = 0; i < p->stop_strs.n; i++) {
				b->strs[i].data = (uint8_t *)p->stop_strs.s[i];
				b->strs[i].len = p->stop_strs.len[i];
			}
			if (!p->stop_strs.n)
				continue;
			*(size_t *)at(out, f->quantifier_offset) =
				(size_t)p->stop_strs.n;
			*(ProtobufCBinaryData **)at(out, f->offset) = b->strs;
			set++;
			continue;
		}
		switch (f->type) {
		case PROTOBUF_C_TYPE_UINT32:
			*(uint32_t *)at(out, f->offset) = (uint32_t)v.i;
			break;
		case PROTOBUF_C_TYPE_INT32:
			*(int32_t *)at(out, f->offset) = (int32_t)v.i;
			break;
		case PROTOBUF_C_TYPE_UINT64:
			*(uint64_t *)at(out, f->offset) = v.u;
			break;
		case PROTOBUF_C_TYPE_FLOAT:
			*(float *)at(out, f->offset) = (float)v.d;
			break;
		case PROTOBUF_C_TYPE_BOOL:
			*(protobuf_c_boolean *)at(out, f->offset) = !!v.i;
			break;
		case PROTOBUF_C_TYPE_STRING:
			*(const char **)at(out, f->offset) = v.s;
			set++;
			continue;
		default:
			continue;
		}
		*(protobuf_c_boolean *)at(out, f->quantifier_offset) = 1;
		set++;
	}
	return set;
}

int spwire_decode(const Quorum__SamplingParams *in, sc_params *p,
		  unsigned *given)
{
	unsigned got = 0;

	if (given)
		*given = 0;
	if (!in)
		return 0;
	for (int id = 0; id < SC_S_COUNT_; id++) {
		const ProtobufCFieldDescriptor *f = field_of(id);
		sc_value v = {0};
		int rc;

		if (!f)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)at(in, f->quantifier_offset);
			const ProtobufCBinaryData *d =
				*(ProtobufCBinaryData *const *)at(
					in, f->offset);

			if (!n)
				continue;
			p->stop_strs.n = 0;
			for (size_t i = 0; i < n; i++) {
				v.s = (const char *)d[i].data;
				v.len = d[i].len;
				if ((rc = sc_params_set(id, &v, p)))
					return rc;
			}
			got |= SC_BIT(id);
			continue;
		}
		if (f->type == PROTOBUF_C_TYPE_STRING) {
			if (!(v.s = *(char *const *)at(in, f->offset)))
				continue;
		} else if (!*(const protobuf_c_boolean *)at(
				   in, f->quantifier_offset)) {
			continue;
		}
		switch (f->type) {
		case PROTOBUF_C_TYPE_UINT32:
			v.i = *(const uint32_t *)at(in, f->offset);
			break;
		case PROTOBUF_C_TYPE_INT32:
			v.i = *(const int32_t *)at(in, f->offset);
			break;
		case PROTOBUF_C_TYPE_UINT64:
			v.u = *(const uint64_t *)at(in, f->offset);
			break;
		case PROTOBUF_C_TYPE_FLOAT:
			v.d = *(const float *)at(in, f->offset);
			break;
		case PROTOBUF_C_TYPE_BOOL:
			v.i = !!*(const protobuf_c_boolean *)at(in, f->offset);
			break;
		case PROTOBUF_C_TYPE_STRING:
			break;
		default:
			return qerr_fail(QERR_FORMAT, "SamplingParams.%s: "
					 "unsupported field type", f->name);
		}
		if ((rc = sc_params_set(id, &v, p)))
			return rc;
		got |= SC_BIT(id);
	}
	if (given)
		*given = got;
	return 0;
}
