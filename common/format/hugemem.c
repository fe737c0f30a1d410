/* hugemem — see hugemem.h. */
#include "format/hugemem.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)

size_t hugemem_span(size_t n)
{
	long ps = sysconf(_SC_PAGESIZE);
	size_t page = ps > 0 ? (size_t)ps : 4096;

	return (n + page - 1) & ~(page - 1);
}

void *hugemem_alloc(size_t n)
{
	size_t len = hugemem_span(n), span = len + HUGE_PAGE;
	char *b, *a;

	if (n == 0 || len < n || len > SIZE_MAX - HUGE_PAGE)
		return NULL;
	/* room to start on a 2 MiB boundary; the ends are given back */
	b = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)b + HUGE_PAGE - 1) &
		     ~(uintptr_t)(HUGE_PAGE - 1));
	if (a > b)
		munmap(b, (size_t)(a - b));
	if (b + span > a + len)
		munmap(a + len, (size_t)(b + span - (a + len)));
	madvise(a, len, MADV_HUGEPAGE);
	return a;
}

void hugemem_free(void *p, size_t n)
{
	if (p)
		munmap(p, hugemem_span(n));
}
