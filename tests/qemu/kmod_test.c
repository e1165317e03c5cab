// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * kmod_test - exercises the bam_nvme kernel module's ABI from user space:
 * argument validation, BAR mmap, host mapping/unmapping without leaks, the
 * GPU-mapping path through the test stand-in provider (bam_p2p_stub),
 * closing with mappings alive, a killed owner, and unbind with mappings
 * alive.  Runs inside the QEMU test guest (tests/qemu/guest-tests.sh).
 *
 *   kmod_test <group> /dev/bam-nvmeN [BDF]
 *
 * Groups: info bar badinput leak gpu-absent gpu close killed quiesced unbind
 *         rmmod-busy nocap lockdown gpu-race revoke-io unmap-io unmap-io-strict
 *         unbind-nvme noiommu shared-group aer remove
 * Each check prints "ok - ..." or "not ok - ...", then the group ends with
 * "N passed, M failed"; the exit status is 0 only if nothing failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bam_nvme_ioctl.h"

#define PAGE 4096UL
#define GPU_PAGE 65536UL

static int passed, failed;
static const char *dev_path;
static const char *bdf;

static void check(int cond, const char *fmt, ...)
{
	va_list ap;

	printf(cond ? "ok - " : "not ok - ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (cond)
		passed++;
	else
		failed++;
}

/* Expect ioctl to fail with errno want. */
static void expect_err(int ret, int want, const char *what)
{
	int e = errno;

	check(ret == -1 && e == want, "%s -> %s (got ret %d, %s)", what, strerror(want),
	      ret, ret == -1 ? strerror(e) : "success");
}

static int open_dev(void)
{
	int fd = open(dev_path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("not ok - open %s: %s\n", dev_path, strerror(errno));
		exit(1);
	}
	return fd;
}

static long read_long_file(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static void read_str_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
}

/*
 * System-wide count of pages pinned with FOLL_PIN and not yet unpinned.
 * vm/stat_refresh folds the per-CPU deltas in first, so the value is exact.
 */
static long foll_pins(void)
{
	FILE *f = fopen("/proc/sys/vm/stat_refresh", "w");
	char name[64];
	long v, acq = -1, rel = -1;

	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			acq = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			rel = v;
	}
	fclose(f);
	return acq < 0 || rel < 0 ? -1 : acq - rel;
}

/* VmPin of this process, in kB. */
static long vm_pin_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static long stub_param(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/bam_p2p_stub/parameters/%s", name);
	return read_long_file(path);
}

static int stub_set_version(unsigned int v)
{
	FILE *f = fopen("/sys/module/bam_p2p_stub/parameters/pt_version", "w");

	if (!f)
		return -1;
	fprintf(f, "%u\n", v);
	return fclose(f);
}

static void *alloc_pages_rw(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 0x5a, len);
	return p;
}

static int map_host(int fd, void *addr, uint64_t len, uint64_t *addrs, uint32_t cap,
		    struct bam_nvme_map *out)
{
	struct bam_nvme_map m = {
		.vaddr = (uintptr_t)addr,
		.length = len,
		.addrs = (uintptr_t)addrs,
		.addrs_len = cap,
	};
	int ret = ioctl(fd, BAM_NVME_IOC_MAP_HOST, &m);

	if (out)
		*out = m;
	return ret;
}

static int unmap(int fd, uint64_t handle, uint32_t *flags)
{
	struct bam_nvme_unmap u = { .handle = handle };
	int ret = ioctl(fd, BAM_NVME_IOC_UNMAP, &u);

	if (flags)
		*flags = u.flags_out;
	return ret;
}

/* ---------------------------------------------------------------------- */

static void group_info(void)
{
	struct bam_nvme_info info;
	char sys[256], buf[64];
	const char *name = strrchr(dev_path, '/') + 1;
	int fd = open_dev(), fd2;

	memset(&info, 0xff, sizeof(info));
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0, "INFO ioctl");
	check(info.abi_version == BAM_NVME_ABI_VERSION, "abi_version %u", info.abi_version);
	check(info.class_code == 0x010802, "class code %06x is NVMe", info.class_code);
	check(info.page_size == PAGE, "page_size %u", info.page_size);
	check(info.bar0_size >= 0x2000, "bar0_size %" PRIu64, (uint64_t)info.bar0_size);
	check(info.nr_mappings == 0 && info.pinned_bytes == 0, "no mappings at open");
	check(info.reserved0 == 0 && info.deferred_mappings == 0, "reserved field zeroed, nothing deferred");
	check(info.flags & BAM_NVME_INFO_P2P_BUILT, "built with p2p support");
	/* the guest boots with iommu.strict=1: DMA domain without a flush queue */
	check(!(info.flags & BAM_NVME_INFO_IOMMU_DMA) || !(info.flags & BAM_NVME_INFO_IOMMU_LAZY),
	      "IOMMU invalidation is strict (flags %#x)", info.flags);
	check(!(info.flags & BAM_NVME_INFO_REVOKED), "not revoked at open");
	snprintf(sys, sizeof(sys), "/sys/class/bam-nvme/%s/bar0_size", name);
	check(read_long_file(sys) == (long)info.bar0_size, "sysfs bar0_size matches ioctl");
	snprintf(sys, sizeof(sys), "/sys/class/bam-nvme/%s/pci_addr", name);
	read_str_file(sys, buf, sizeof(buf));
	snprintf(sys, sizeof(sys), "%04x:%02x:%02x.%x", info.pci_domain, info.pci_bus,
		 info.pci_device, info.pci_function);
	check(!strcmp(buf, sys), "sysfs pci_addr %s == ioctl %s", buf, sys);
	if (bdf)
		check(!strcmp(buf, bdf), "pci_addr is the bound BDF %s", bdf);
	snprintf(sys, sizeof(sys), "/sys/class/bam-nvme/%s/iommu", name);
	read_str_file(sys, buf, sizeof(buf));
	check(!strcmp(buf, "dma") == !!(info.flags & BAM_NVME_INFO_IOMMU_DMA),
	      "sysfs iommu '%s' agrees with flags %#x", buf, info.flags);
	printf("# %s: %s iommu=%s flags=%#x bar0=%" PRIu64 " dma_mask=%#" PRIx64 "\n", dev_path,
	       sys, buf, info.flags, (uint64_t)info.bar0_size, (uint64_t)info.dma_mask);
	snprintf(sys, sizeof(sys), "/sys/class/bam-nvme/%s/owner_pid", name);
	check(read_long_file(sys) == getpid(), "sysfs owner_pid is us");

	fd2 = open(dev_path, O_RDWR);
	expect_err(fd2, EBUSY, "second open while owned");
	if (fd2 >= 0)
		close(fd2);
	expect_err(ioctl(fd, _IO('B', 0x7f)), ENOTTY, "unknown ioctl");
	expect_err(ioctl(fd, BAM_NVME_IOC_INFO, (void *)16), EFAULT, "INFO to bad pointer");
	close(fd);
	fd2 = open(dev_path, O_RDWR);
	check(fd2 >= 0, "reopen after close");
	close(fd2);
}

static sigjmp_buf sigbus_jmp;
static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(sigbus_jmp, 1);
}

/* 1 if reading *p raised SIGBUS */
static int read_faults(volatile uint32_t *p, uint32_t *val)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old_bus, old_segv;
	int faulted = 0;

	sigaction(SIGBUS, &sa, &old_bus);
	sigaction(SIGSEGV, &sa, &old_segv);
	if (sigsetjmp(sigbus_jmp, 1) == 0)
		*val = *p;
	else
		faulted = 1;
	sigaction(SIGBUS, &old_bus, NULL);
	sigaction(SIGSEGV, &old_segv, NULL);
	return faulted;
}

static void group_bar(void)
{
	struct bam_nvme_info info;
	int fd = open_dev();
	volatile uint32_t *bar;
	uint32_t cap_lo, vs;
	void *p;

	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(bar != MAP_FAILED, "mmap BAR0 (%" PRIu64 " bytes)", (uint64_t)info.bar0_size);
	if (bar == MAP_FAILED)
		return;
	cap_lo = bar[0];
	vs = bar[2];
	check(cap_lo != 0 && cap_lo != 0xffffffff, "CAP low dword %#x", cap_lo);
	check(vs >= 0x00010000 && vs != 0xffffffff, "VS %#x is NVMe >= 1.0", vs);
	check(bar[0] == cap_lo, "register reads are stable");
	munmap((void *)bar, info.bar0_size);

	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, PAGE);
	expect_err(p == MAP_FAILED ? -1 : 0, EINVAL, "mmap at non-zero offset");
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	expect_err(p == MAP_FAILED ? -1 : 0, EINVAL, "private mmap");
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	p = mmap(NULL, info.bar0_size + 16 * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	expect_err(p == MAP_FAILED ? -1 : 0, EINVAL, "mmap larger than BAR0");
	if (p != MAP_FAILED)
		munmap(p, info.bar0_size + 16 * PAGE);
	p = mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	expect_err(p == MAP_FAILED ? -1 : 0, EPERM, "executable mmap");
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	check(p != MAP_FAILED && mprotect(p, PAGE, PROT_READ | PROT_EXEC) != 0,
	      "mprotect(PROT_EXEC) on the BAR refused");
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	close(fd);
}

static void group_badinput(void)
{
	int fd = open_dev();
	long pins0 = foll_pins();
	uint64_t addrs[64];
	struct bam_nvme_map m;
	struct bam_nvme_unmap u;
	char *buf = alloc_pages_rw(16 * PAGE);
	void *ro, *hole;
	uint32_t flags;

	expect_err(map_host(fd, buf, 0, addrs, 64, NULL), EINVAL, "zero length");
	expect_err(map_host(fd, buf + 8, PAGE, addrs, 64, NULL), EINVAL, "unaligned address");
	expect_err(map_host(fd, buf, PAGE + 512, addrs, 64, NULL), EINVAL, "unaligned length");
	expect_err(map_host(fd, buf, 1ULL << 40, addrs, UINT32_MAX, NULL), E2BIG,
		   "huge length (1 TiB)");
	expect_err(map_host(fd, (void *)(uintptr_t)0xfffffffffffff000ULL, 0x2000, addrs, 64,
			    NULL),
		   EOVERFLOW, "address + length overflows");
	expect_err(map_host(fd, (void *)(uintptr_t)0xffff888000000000ULL, PAGE, addrs, 64, NULL),
		   EFAULT, "kernel address");
	expect_err(map_host(fd, buf, 16 * PAGE, addrs, 15, NULL), ENOBUFS,
		   "address array too small");
	expect_err(map_host(fd, buf, 16 * PAGE, (uint64_t *)(uintptr_t)0xffff888000000000ULL,
			    64, NULL),
		   EFAULT, "address array in kernel space");
	hole = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole, 4 * PAGE);
	expect_err(map_host(fd, hole, 4 * PAGE, addrs, 64, NULL), EFAULT, "unmapped memory");
	ro = mmap(NULL, 4 * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	expect_err(map_host(fd, ro, 4 * PAGE, addrs, 64, NULL), EFAULT, "read-only memory");
	munmap(ro, 4 * PAGE);
	expect_err(map_host(fd, buf, 4 * PAGE, (uint64_t *)hole, 64, NULL), EFAULT,
		   "unwritable address array (mapping undone)");
	memset(&m, 0, sizeof(m));
	m.vaddr = (uintptr_t)buf;
	m.length = PAGE;
	m.addrs = (uintptr_t)addrs;
	m.addrs_len = 1;
	m.flags = 1;
	expect_err(ioctl(fd, BAM_NVME_IOC_MAP_HOST, &m), EINVAL, "unknown flags");
	expect_err(ioctl(fd, BAM_NVME_IOC_MAP_HOST, (void *)8), EFAULT, "MAP_HOST bad pointer");

	expect_err(unmap(fd, 0, NULL), ENOENT, "unmap handle 0");
	expect_err(unmap(fd, 12345, NULL), ENOENT, "unmap never-mapped handle");
	expect_err(unmap(fd, 1ULL << 40, NULL), ENOENT, "unmap out-of-range handle");
	memset(&u, 0, sizeof(u));
	u.handle = 1;
	u.flags = 6;
	expect_err(ioctl(fd, BAM_NVME_IOC_UNMAP, &u), EINVAL, "unmap with unknown flags");

	check(map_host(fd, buf, 16 * PAGE, addrs, 64, &m) == 0, "valid 16-page mapping");
	check(m.handle != 0 && m.entries == 16 && m.page_size == PAGE,
	      "handle %" PRIu64 ", %u entries of %u bytes", (uint64_t)m.handle, m.entries,
	      m.page_size);
	{
		int good = 1;

		for (int i = 0; i < 16; i++)
			good &= addrs[i] != 0 && (addrs[i] & (PAGE - 1)) == 0;
		check(good, "bus addresses non-zero and page-aligned");
	}
	check(foll_pins() - pins0 == 16, "16 pages pinned (%ld)", foll_pins() - pins0);
	check(vm_pin_kb() == 64, "VmPin accounts 64 kB (%ld)", vm_pin_kb());
	check(unmap(fd, m.handle, &flags) == 0 && flags == 0, "unmap");
	check(vm_pin_kb() == 0, "VmPin back to 0");
	expect_err(unmap(fd, m.handle, NULL), ENOENT, "double unmap");
	check(foll_pins() == pins0, "pins back to baseline");

	/* another process may not use our file */
	if (map_host(fd, buf, PAGE, addrs, 64, &m) == 0) {
		pid_t pid = fork();

		if (pid == 0) {
			uint64_t a[1];
			int r1 = map_host(fd, buf, PAGE, a, 1, NULL);
			int e1 = errno;
			int r2 = unmap(fd, m.handle, NULL);
			int e2 = errno;

			_exit(r1 == -1 && e1 == EPERM && r2 == -1 && e2 == EPERM ? 0 : 1);
		}
		int st;

		waitpid(pid, &st, 0);
		check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "MAP_HOST and UNMAP from another process -> EPERM");
		check(unmap(fd, m.handle, NULL) == 0, "owner unmaps it");
	}
	close(fd);
	check(foll_pins() == pins0, "pins back to baseline after close");
	munmap(buf, 16 * PAGE);
}

static void group_leak(int iterations)
{
	int fd = open_dev();
	long pins0 = foll_pins(), vmpin0 = vm_pin_kb();
	size_t max = 256 * PAGE;
	char *buf = alloc_pages_rw(max);
	uint64_t *addrs = calloc(max / PAGE, sizeof(uint64_t));
	uint64_t handles[8];
	struct bam_nvme_info info;
	int bad = 0;

	for (int it = 0; it < iterations; it++) {
		int n = 1 + it % 8;

		for (int k = 0; k < n; k++) {
			size_t pages = 1 + (size_t)(it * 7 + k * 13) % (max / PAGE / 8);
			struct bam_nvme_map m;

			if (map_host(fd, buf + k * (max / 8), pages * PAGE, addrs, max / PAGE, &m)) {
				bad++;
				handles[k] = 0;
				continue;
			}
			handles[k] = m.handle;
			if (m.entries != pages)
				bad++;
		}
		for (int k = n - 1; k >= 0; k--)
			if (handles[k] && unmap(fd, handles[k], NULL))
				bad++;
	}
	check(bad == 0, "%d map/unmap rounds without error (%d errors)", iterations, bad);
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && info.nr_mappings == 0 &&
		      info.pinned_bytes == 0,
	      "INFO: 0 mappings, 0 pinned bytes after the loop");
	check(foll_pins() == pins0, "system pinned-page count back to baseline (%ld vs %ld)",
	      foll_pins(), pins0);
	check(vm_pin_kb() == vmpin0, "VmPin back to %ld kB", vmpin0);

	/* the same memory mapped twice at once is fine: two pins */
	{
		struct bam_nvme_map a, b;

		check(map_host(fd, buf, 4 * PAGE, addrs, 256, &a) == 0 &&
			      map_host(fd, buf, 4 * PAGE, addrs, 256, &b) == 0 && a.handle != b.handle,
		      "overlapping mappings get distinct handles");
		check(foll_pins() - pins0 == 8, "and pin twice");
		unmap(fd, a.handle, NULL);
		unmap(fd, b.handle, NULL);
		check(foll_pins() == pins0, "and unpin twice");
	}
	close(fd);
	free(addrs);
	munmap(buf, max);
}

static void group_gpu_absent(void)
{
	int fd = open_dev();
	uint64_t addrs[16];
	struct bam_nvme_map m = { .vaddr = 0x10000, .length = GPU_PAGE,
				  .addrs = (uintptr_t)addrs, .addrs_len = 16 };
	struct bam_nvme_info info;

	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(!(info.flags & BAM_NVME_INFO_P2P_AVAILABLE), "INFO: p2p not available");
	expect_err(ioctl(fd, BAM_NVME_IOC_MAP_GPU, &m), EOPNOTSUPP,
		   "MAP_GPU without the NVIDIA driver");
	m.vaddr = 0x1000;
	expect_err(ioctl(fd, BAM_NVME_IOC_MAP_GPU, &m), EINVAL, "MAP_GPU unaligned (checked first)");
	close(fd);
}

static int stub_open(void)
{
	int fd = open("/dev/bam-p2p-stub", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("not ok - open /dev/bam-p2p-stub: %s\n", strerror(errno));
		exit(1);
	}
	return fd;
}

/* "cudaMalloc": 64 KiB-aligned stub memory */
static char *gpu_alloc(int sfd, size_t len)
{
	/* reserve, then place the shared mapping at a 64 KiB boundary */
	char *r = mmap(NULL, len + GPU_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a = (char *)(((uintptr_t)r + GPU_PAGE - 1) & ~(GPU_PAGE - 1));
	char *p = mmap(a, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, sfd, 0);

	if (p == MAP_FAILED) {
		perror("stub mmap");
		exit(1);
	}
	if (a > r)
		munmap(r, a - r);
	if (r + len + GPU_PAGE > a + len)
		munmap(a + len, r + len + GPU_PAGE - (a + len));
	return p;
}

static int map_gpu(int fd, void *p, uint64_t len, uint32_t flags, uint64_t *addrs,
		   uint32_t cap, struct bam_nvme_map *out)
{
	struct bam_nvme_map m = { .vaddr = (uintptr_t)p, .length = len,
				  .addrs = (uintptr_t)addrs, .addrs_len = cap, .flags = flags };
	int ret = ioctl(fd, BAM_NVME_IOC_MAP_GPU, &m);

	if (out)
		*out = m;
	return ret;
}

static int stub_idle(void)
{
	return stub_param("live_page_tables") == 0 && stub_param("live_dma_mappings") == 0;
}

static void group_gpu(void)
{
	int fd = open_dev(), sfd = stub_open();
	size_t len = 16 * GPU_PAGE;
	char *g = gpu_alloc(sfd, len);
	uint64_t addrs[64];
	struct bam_nvme_map m, m2;
	struct bam_nvme_info info;
	long cb0 = stub_param("callbacks");
	uint32_t flags;
	int good = 1;

	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(info.flags & BAM_NVME_INFO_P2P_AVAILABLE, "INFO: p2p available with the stand-in");
	check(map_gpu(fd, g, len, 0, addrs, 64, &m) == 0, "MAP_GPU 1 MiB");
	check(m.entries == 16 && m.page_size == GPU_PAGE, "%u entries of %u bytes", m.entries,
	      m.page_size);
	for (int i = 0; i < 16; i++)
		good &= addrs[i] != 0 && (addrs[i] & (PAGE - 1)) == 0;
	check(good, "GPU bus addresses non-zero and 4 KiB aligned");
	check(stub_param("live_page_tables") == 1 && stub_param("live_dma_mappings") == 1,
	      "provider: one page table, one DMA mapping");
	check(unmap(fd, m.handle, &flags) == 0 && flags == 0, "unmap GPU mapping");
	check(stub_idle(), "provider: all released after unmap");
	expect_err(unmap(fd, m.handle, NULL), ENOENT, "double unmap of GPU mapping");

	expect_err(map_gpu(fd, g + PAGE, GPU_PAGE, 0, addrs, 64, NULL), EINVAL,
		   "MAP_GPU at a 4 KiB-aligned address");
	expect_err(map_gpu(fd, g, GPU_PAGE + PAGE, 0, addrs, 64, NULL), EINVAL,
		   "MAP_GPU with a 4 KiB-multiple length");
	expect_err(map_gpu(fd, g, len, 0, addrs, 15, NULL), ENOBUFS, "MAP_GPU array too small");
	expect_err(map_gpu(fd, g, len, 0x80, addrs, 64, NULL), EINVAL, "MAP_GPU unknown flag");
	expect_err(map_gpu(fd, g + len, GPU_PAGE * 64, 0, addrs, 64, NULL), EINVAL,
		   "MAP_GPU beyond the allocation (provider refuses)");
	check(stub_idle(), "provider idle after refusals");

	/* the older page-table layout is accepted; an unknown major is not */
	check(stub_set_version(0x00010001) == 0, "provider: hand out page table v1.1");
	check(map_gpu(fd, g, 2 * GPU_PAGE, 0, addrs, 64, &m) == 0 && m.entries == 2,
	      "MAP_GPU with the pre-5xx page-table layout");
	check(unmap(fd, m.handle, NULL) == 0, "unmap it");
	stub_set_version(0x00020000);
	expect_err(map_gpu(fd, g, GPU_PAGE, 0, addrs, 64, NULL), EPROTO,
		   "page table major version 2 refused");
	stub_set_version(0x00010002);
	check(stub_idle(), "provider idle after version tests");

	/* persistent variant */
	check(map_gpu(fd, g, 4 * GPU_PAGE, BAM_NVME_MAP_GPU_PERSISTENT, addrs, 64, &m) == 0,
	      "MAP_GPU persistent");
	check(unmap(fd, m.handle, &flags) == 0 && flags == 0, "unmap persistent");
	check(stub_idle(), "provider idle");

	/* free callback: "cudaFree" while mapped */
	check(map_gpu(fd, g, len, 0, addrs, 64, &m) == 0, "MAP_GPU (callback variant)");
	check(map_gpu(fd, g, 2 * GPU_PAGE, BAM_NVME_MAP_GPU_PERSISTENT, addrs, 64, &m2) == 0,
	      "MAP_GPU persistent on the same memory");
	munmap(g, len);
	check(stub_param("callbacks") == cb0 + 1, "free callback ran once (%ld)",
	      stub_param("callbacks") - cb0);
	check(stub_param("live_page_tables") == 1 && stub_param("live_dma_mappings") == 1,
	      "callback released its page table and DMA mapping; persistent one remains");
	check(unmap(fd, m.handle, &flags) == 0 && (flags & BAM_NVME_UNMAP_REVOKED),
	      "unmap of revoked mapping reports REVOKED");
	check(unmap(fd, m2.handle, &flags) == 0 && flags == 0,
	      "persistent mapping outlives the free and unmaps cleanly");
	check(stub_idle(), "provider idle after callback test");
	/* the callback stopped the controller and revoked the file: start over */
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && (info.flags & BAM_NVME_INFO_REVOKED),
	      "INFO reports the revocation");
	expect_err(map_gpu(fd, g, GPU_PAGE, 0, addrs, 64, NULL), ENOTRECOVERABLE,
		   "MAP_GPU on a revoked file");
	close(fd);
	fd = open_dev();

	/* closing with GPU and host mappings alive */
	g = gpu_alloc(sfd, len);
	{
		char *h = alloc_pages_rw(8 * PAGE);
		long pins0 = foll_pins();

		check(map_gpu(fd, g, len, 0, addrs, 64, &m) == 0 &&
			      map_gpu(fd, g, GPU_PAGE, BAM_NVME_MAP_GPU_PERSISTENT, addrs, 64, &m2) == 0 &&
			      map_host(fd, h, 8 * PAGE, addrs, 64, NULL) == 0,
		      "GPU, persistent GPU and host mappings alive");
		close(fd);
		check(stub_idle(), "close released the GPU mappings");
		check(foll_pins() == pins0, "close released the host pins");
		munmap(h, 8 * PAGE);
	}
	check(stub_param("callbacks") == cb0 + 1, "no callback for mappings released by close");
	munmap(g, len);
	close(sfd);
}

/* Maps things, then closes (or dies) with them alive; the parent checks. */
static void group_close(void)
{
	long pins0 = foll_pins();
	int fd = open_dev();
	struct bam_nvme_info info;
	char *h = alloc_pages_rw(64 * PAGE);
	uint64_t addrs[64];
	void *bar;

	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	for (int i = 0; i < 8; i++)
		map_host(fd, h + i * 8 * PAGE, 8 * PAGE, addrs, 64, NULL);
	check(foll_pins() - pins0 == 64, "64 pages pinned by 8 mappings");
	bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	check(foll_pins() - pins0 == 64, "BAR mapping keeps the file (and its mappings) alive");
	check(((volatile uint32_t *)bar)[2] >= 0x10000, "BAR still readable after close()");
	munmap(bar, info.bar0_size);
	check(foll_pins() == pins0, "munmap of the BAR released the file and its pins");
	fd = open(dev_path, O_RDWR);
	check(fd >= 0, "device free again");
	if (fd >= 0)
		close(fd);
	munmap(h, 64 * PAGE);
}

static void group_killed(void)
{
	long pins0 = foll_pins();
	int pfd[2], st, fd;
	pid_t pid;
	char c;

	if (pipe(pfd))
		exit(1);
	pid = fork();
	if (pid == 0) {
		int cfd = open_dev();
		char *h = alloc_pages_rw(128 * PAGE);
		uint64_t addrs[128];
		struct bam_nvme_info info;
		volatile uint32_t *bar;

		ioctl(cfd, BAM_NVME_IOC_INFO, &info);
		bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
		for (int i = 0; i < 4; i++)
			map_host(cfd, h + i * 32 * PAGE, 32 * PAGE, addrs, 128, NULL);
		(void)bar[0];
		if (write(pfd[1], "r", 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(pfd[1]);
	check(read(pfd[0], &c, 1) == 1, "child mapped memory and the BAR");
	check(foll_pins() - pins0 == 128, "child holds 128 pins");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	check(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child killed");
	check(foll_pins() == pins0, "pins released after the owner died");
	fd = open(dev_path, O_RDWR);
	check(fd >= 0, "device can be opened again");
	if (fd >= 0)
		close(fd);
}

static void mount_securityfs(void)
{
	if (mount("securityfs", "/sys/kernel/security", "securityfs", 0, NULL))
		printf("# mount securityfs: %s\n", strerror(errno));
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* Unbind the device while we hold mappings; BDF required. */
static void group_unbind(void)
{
	long pins0 = foll_pins();
	int fd = open_dev(), sfd = -1;
	struct bam_nvme_info info;
	char *h = alloc_pages_rw(32 * PAGE);
	uint64_t addrs[64];
	struct bam_nvme_map hm, gm;
	volatile uint32_t *bar;
	char *g = NULL;
	uint32_t v;
	int have_stub = access("/dev/bam-p2p-stub", F_OK) == 0;

	if (!bdf) {
		check(0, "unbind needs the BDF");
		return;
	}
	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(bar != MAP_FAILED && !read_faults(bar + 2, &v), "BAR mapped and readable");
	check(map_host(fd, h, 32 * PAGE, addrs, 64, &hm) == 0, "host mapping alive");
	if (have_stub) {
		sfd = stub_open();
		g = gpu_alloc(sfd, 4 * GPU_PAGE);
		check(map_gpu(fd, g, 4 * GPU_PAGE, 0, addrs, 64, &gm) == 0, "GPU mapping alive");
	}
	check(sysfs_write("/sys/bus/pci/drivers/bam_nvme/unbind", bdf) == 0,
	      "unbind %s while mapped", bdf);
	check(foll_pins() == pins0, "unbind released the host pins at once");
	if (have_stub)
		check(stub_idle(), "unbind released the GPU mapping at once");
	check(read_faults(bar + 2, &v), "BAR access after unbind raises SIGBUS");
	expect_err(ioctl(fd, BAM_NVME_IOC_INFO, &info), ENODEV, "INFO after unbind");
	expect_err(map_host(fd, h, PAGE, addrs, 64, NULL), ENODEV, "MAP_HOST after unbind");
	if (have_stub)
		expect_err(map_gpu(fd, g, GPU_PAGE, 0, addrs, 64, NULL), ENODEV,
			   "MAP_GPU after unbind");
	expect_err(unmap(fd, hm.handle, NULL), ENODEV, "UNMAP after unbind");
	{
		void *p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);

		expect_err(p == MAP_FAILED ? -1 : 0, ENODEV, "mmap after unbind");
	}
	check(access(dev_path, F_OK) != 0, "device node removed");
	munmap((void *)bar, info.bar0_size);
	close(fd);
	check(foll_pins() == pins0, "close after unbind is clean");
	check(sysfs_write("/sys/bus/pci/drivers/bam_nvme/bind", bdf) == 0, "rebind %s", bdf);
	if (g)
		munmap(g, 4 * GPU_PAGE);
	if (sfd >= 0)
		close(sfd);
	munmap(h, 32 * PAGE);
}

/* After the owner is gone, the module has left the controller disabled. */
static void group_quiesced(void)
{
	int fd = open_dev();
	struct bam_nvme_info info;
	volatile uint32_t *bar;

	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(bar != MAP_FAILED, "map BAR0");
	if (bar != MAP_FAILED) {
		uint32_t cc = bar[0x14 / 4], csts = bar[0x1c / 4];

		check(!(cc & 1) && !(csts & 1), "controller disabled after its owner died (CC %#x CSTS %#x)",
		      cc, csts);
		check(info.nr_mappings == 0 && info.pinned_bytes == 0, "no mappings left over");
		munmap((void *)bar, info.bar0_size);
	}
	close(fd);
}

/* rmmod must refuse while a file is open, and not disturb it. */
static void group_rmmod_busy(void)
{
	int fd = open_dev();
	struct bam_nvme_info info;
	long r = syscall(SYS_delete_module, "bam_nvme", O_NONBLOCK);

	expect_err((int)r, EWOULDBLOCK, "rmmod bam_nvme while a file is open");
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0, "file still works");
	close(fd);
}


/* ---------------------------------------------------------------------- */
/* security: capability and lockdown                                       */

/* Drop CAP_SYS_RAWIO from this (root) process's effective and permitted sets. */
static int drop_rawio(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_SYS_RAWIO / 32].effective &= ~(1U << (CAP_SYS_RAWIO % 32));
	d[CAP_SYS_RAWIO / 32].permitted &= ~(1U << (CAP_SYS_RAWIO % 32));
	d[CAP_SYS_RAWIO / 32].inheritable &= ~(1U << (CAP_SYS_RAWIO % 32));
	return (int)syscall(SYS_capset, &h, d);
}

/* open needs CAP_SYS_RAWIO: a root process without it gets EPERM */
static void group_nocap(void)
{
	int pfd[2], st;
	pid_t pid;
	char res[64] = { 0 };

	if (pipe(pfd))
		exit(1);
	pid = fork();
	if (pid == 0) {
		int fd, e;

		close(pfd[0]);
		if (drop_rawio()) {
			dprintf(pfd[1], "capset failed: %s", strerror(errno));
			_exit(1);
		}
		fd = open(dev_path, O_RDWR);
		e = errno;
		dprintf(pfd[1], "%s", fd >= 0 ? "opened" : strerror(e));
		_exit(fd < 0 && e == EPERM ? 0 : 1);
	}
	close(pfd[1]);
	if (read(pfd[0], res, sizeof(res) - 1) < 0)
		res[0] = 0;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "open as root without CAP_SYS_RAWIO -> EPERM (got: %s)", res);
	{
		int fd = open(dev_path, O_RDWR);

		check(fd >= 0, "open with CAP_SYS_RAWIO still works");
		if (fd >= 0)
			close(fd);
	}
}

/* Locks the kernel down (integrity; one-way, for the rest of the boot). */
static void group_lockdown(void)
{
	const char *lp = "/sys/kernel/security/lockdown";
	char buf[128];
	int fd;

	if (access(lp, F_OK) != 0)
		mount_securityfs();
	read_str_file(lp, buf, sizeof(buf));
	check(buf[0] != 0, "lockdown state readable: %s", buf);
	fd = open(dev_path, O_RDWR);
	check(fd >= 0, "open before lockdown");
	if (fd >= 0)
		close(fd);
	check(sysfs_write(lp, "integrity") == 0, "lock the kernel down (integrity)");
	read_str_file(lp, buf, sizeof(buf));
	check(strstr(buf, "[integrity]") != NULL, "lockdown now %s", buf);
	fd = open(dev_path, O_RDWR);
	expect_err(fd, EPERM, "open under lockdown");
	if (fd >= 0)
		close(fd);
}

/* ---------------------------------------------------------------------- */
/* MAP_GPU vs the free callback; put_pages vs a callback in flight         */

static int stub_param_set(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/bam_p2p_stub/parameters/%s", name);
	return sysfs_write(path, val);
}

struct unmap_arg {
	int fd;
	uint64_t handle;
	uint32_t flags;
	int ret;
};

static void *unmap_thread(void *p)
{
	struct unmap_arg *a = p;

	a->ret = unmap(a->fd, a->handle, &a->flags);
	return NULL;
}

struct free_arg {
	void *p;
	size_t len;
};

/* "cudaFree" from another thread: the stand-in's callbacks run inside munmap */
static void *free_thread(void *p)
{
	struct free_arg *a = p;

	munmap(a->p, a->len);
	return NULL;
}

static void group_gpu_race(int iterations)
{
	int fd = open_dev(), sfd = stub_open();
	size_t len = 16 * GPU_PAGE;
	char *g = gpu_alloc(sfd, len);
	uint64_t addrs[64], haddr[4];
	struct bam_nvme_map m;
	struct bam_nvme_info info;
	long cb0 = stub_param("callbacks"), w0 = stub_param("put_waits");
	uint32_t flags;
	int r, good = 1, revoked = 0, bad = 0;
	char *h = alloc_pages_rw(4 * PAGE);

	/* the stand-in revokes the table from another thread right after get_pages */
	check(stub_param_set("race_next_get_pages", "1") == 0, "arm the racing free callback");
	r = map_gpu(fd, g, len, 0, addrs, 64, &m);
	check(r == 0 && m.entries == 16,
	      "MAP_GPU completes although the free callback fired during it (ret %d, %s)", r,
	      r ? strerror(errno) : "ok");
	for (int i = 0; r == 0 && i < 16; i++)
		good &= addrs[i] != 0 && (addrs[i] & (PAGE - 1)) == 0;
	check(r == 0 && good, "its bus addresses are valid");
	for (int i = 0; i < 500 && stub_param("callbacks") == cb0; i++)
		usleep(10000);
	check(stub_param("callbacks") == cb0 + 1, "the callback ran after MAP_GPU");
	for (int i = 0; i < 500 && !stub_idle(); i++)
		usleep(10000);
	check(stub_idle(), "callback released the page table and DMA mapping");
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && (info.flags & BAM_NVME_INFO_REVOKED),
	      "INFO reports REVOKED (flags %#x)", info.flags);
	if (r == 0)
		check(unmap(fd, m.handle, &flags) == 0 && (flags & BAM_NVME_UNMAP_REVOKED),
		      "UNMAP reports REVOKED");
	expect_err(map_host(fd, h, PAGE, haddr, 4, NULL), ENOTRECOVERABLE,
		   "MAP_HOST after a revocation");
	expect_err(map_gpu(fd, g, GPU_PAGE, 0, addrs, 64, NULL), ENOTRECOVERABLE,
		   "MAP_GPU after a revocation");
	stub_param_set("race_next_get_pages", "0");
	close(fd);
	munmap(g, len);
	fd = open_dev();
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && !(info.flags & BAM_NVME_INFO_REVOKED),
	      "a new open starts unrevoked");
	check(map_host(fd, h, PAGE, haddr, 4, &m) == 0 && unmap(fd, m.handle, NULL) == 0,
	      "and maps again");
	close(fd);

	/* UNMAP racing cudaFree: put_pages must wait for the callback in flight */
	for (int it = 0; it < iterations; it++) {
		struct unmap_arg a;
		pthread_t th;

		fd = open_dev();
		g = gpu_alloc(sfd, 4 * GPU_PAGE);
		if (map_gpu(fd, g, 4 * GPU_PAGE, 0, addrs, 64, &m)) {
			bad++;
			close(fd);
			munmap(g, 4 * GPU_PAGE);
			continue;
		}
		a = (struct unmap_arg){ .fd = fd, .handle = m.handle };
		pthread_create(&th, NULL, unmap_thread, &a);
		if (it & 1)
			usleep(it % 7);
		munmap(g, 4 * GPU_PAGE);
		pthread_join(th, NULL);
		if (a.ret)
			bad++;
		if (a.flags & BAM_NVME_UNMAP_REVOKED)
			revoked++;
		close(fd);
	}
	check(bad == 0, "%d UNMAP/cudaFree races without error (%d revoked first)", iterations,
	      revoked);
	printf("# put_pages waited for a callback in flight %ld time(s) in the races\n",
	       stub_param("put_waits") - w0);

	/*
	 * The same race, made certain: the stand-in's callback sleeps
	 * (cb_delay_ms) after it is recorded in flight, UNMAP claims the
	 * mapping meanwhile, and its put_pages must wait for that callback
	 * before our teardown frees the data the callback points to.
	 */
	{
		struct free_arg fa;
		pthread_t th;
		long w1 = stub_param("put_waits");

		check(stub_param_set("cb_delay_ms", "300") == 0, "slow free callbacks (300 ms)");
		fd = open_dev();
		g = gpu_alloc(sfd, 4 * GPU_PAGE);
		r = map_gpu(fd, g, 4 * GPU_PAGE, 0, addrs, 64, &m);
		check(r == 0, "MAP_GPU");
		fa = (struct free_arg){ .p = g, .len = 4 * GPU_PAGE };
		pthread_create(&th, NULL, free_thread, &fa);
		usleep(100 * 1000);	/* the callback is in flight, sleeping */
		r = r ? r : unmap(fd, m.handle, &flags);
		check(r == 0 && !(flags & BAM_NVME_UNMAP_REVOKED),
		      "UNMAP claims the mapping while its callback is in flight (ret %d flags %#x)",
		      r, flags);
		pthread_join(th, NULL);
		stub_param_set("cb_delay_ms", "0");
		check(stub_param("put_waits") > w1,
		      "put_pages waited for the callback in flight (%ld -> %ld)", w1,
		      stub_param("put_waits"));
		check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && !(info.flags & BAM_NVME_INFO_REVOKED),
		      "the late callback left the file alone (flags %#x)", info.flags);
		close(fd);
	}
	check(stub_param("put_waits") > w0, "the put_pages wait path ran (%ld time(s))",
	      stub_param("put_waits") - w0);
	check(stub_idle(), "provider idle after the races (%ld tables, %ld DMA mappings)",
	      stub_param("live_page_tables"), stub_param("live_dma_mappings"));
	munmap(h, 4 * PAGE);
	close(sfd);
}

/* ---------------------------------------------------------------------- */
/* revocation with I/O in flight: a minimal NVMe driver over the BAR       */

struct sqe {
	uint32_t cdw0, nsid, cdw2, cdw3;
	uint64_t mptr, prp1, prp2;
	uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

struct cqe {
	uint32_t dw0, dw1;
	uint16_t sqhd, sqid, cid, status;
};

struct nq {
	volatile struct sqe *sq;
	volatile struct cqe *cq;
	volatile uint32_t *sqdb, *cqdb;
	uint16_t depth, tail, head, phase;
};

static volatile uint32_t *g_bar;

static uint32_t reg32(unsigned int off)
{
	return g_bar[off / 4];
}

static void wreg32(unsigned int off, uint32_t v)
{
	g_bar[off / 4] = v;
}

static int wait_rdy(uint32_t want, int ms)
{
	for (int i = 0; i < ms; i++) {
		uint32_t csts = reg32(0x1c);

		if (csts == 0xffffffff)
			return -1;
		if ((csts & 1) == want)
			return 0;
		usleep(1000);
	}
	return -1;
}

static void nq_submit(struct nq *q, const struct sqe *e, int ring)
{
	memcpy((void *)&q->sq[q->tail], e, sizeof(*e));
	q->tail = (q->tail + 1) % q->depth;
	__sync_synchronize();
	if (ring)
		*q->sqdb = q->tail;
}

/* one completion, or -1 after ms; *status gets the status field (no phase) */
static int nq_reap(struct nq *q, int ms, uint16_t *status)
{
	for (int i = 0; i < ms * 10; i++) {
		uint16_t st = q->cq[q->head].status;

		if ((st & 1) == q->phase) {
			__sync_synchronize();
			*status = st >> 1;
			q->head = (q->head + 1) % q->depth;
			if (q->head == 0)
				q->phase ^= 1;
			*q->cqdb = q->head;
			return 0;
		}
		usleep(100);
	}
	return -1;
}

static int nq_cmd(struct nq *q, struct sqe *e, uint16_t cid)
{
	uint16_t st;

	e->cdw0 = (e->cdw0 & 0xffff) | ((uint32_t)cid << 16);
	nq_submit(q, e, 1);
	if (nq_reap(q, 5000, &st))
		return -1;
	return st;
}

/*
 * Reads long enough to still be in flight when the test acts: nreads reads
 * of ppr 4 KiB pages each (ppr > 2: through a PRP list; list n in the page
 * at pl + n * PAGE, bus address pl_bus[n]) into the pages pg[0..npg)
 * (npg a multiple of ppr; read n uses pages (n * ppr) % npg on), LBA
 * n * ppr * 8.  Rings the doorbell once, after the last.
 */
static void submit_reads(struct nq *iq, const uint64_t *pg, unsigned int npg, char *pl,
			 const uint64_t *pl_bus, int nreads, unsigned int ppr)
{
	struct sqe e;

	for (int n = 0; n < nreads; n++) {
		unsigned int base = (n * ppr) % npg;

		memset(&e, 0, sizeof(e));
		e.cdw0 = 0x02 | ((uint32_t)(100 + n) << 16);
		e.nsid = 1;
		e.prp1 = pg[base];
		if (ppr == 2) {
			e.prp2 = pg[base + 1];
		} else {
			uint64_t *l = (uint64_t *)(pl + (size_t)n * PAGE);

			for (unsigned int i = 1; i < ppr; i++)
				l[i - 1] = pg[base + i];
			e.prp2 = pl_bus[n];
		}
		e.cdw10 = (uint32_t)(n * ppr * 8);
		e.cdw12 = ppr * 8 - 1;
		nq_submit(iq, &e, 0);
	}
	__sync_synchronize();
	*iq->sqdb = iq->tail;
}

/* completions already posted in iq's CQ and not consumed */
static int uio_posted(struct nq *iq)
{
	int n = 0;

	for (int i = 0; i < iq->depth - 1; i++)
		if ((iq->cq[(iq->head + i) % iq->depth].status & 1) == iq->phase)
			n++;
		else
			break;
	return n;
}

/*
 * Controller bring-up over the BAR (g_bar): admin SQ/CQ in host pages 0/1
 * of h (bus addresses haddr), I/O SQ/CQ 1 in pages 2/3, 64 entries each.
 */
static int nvme_up(const uint64_t *haddr, char *h, struct nq *aq, struct nq *iq)
{
	uint64_t cap = (uint64_t)reg32(0) | ((uint64_t)reg32(4) << 32);
	unsigned int db = 4U << ((cap >> 32) & 0xf);
	struct sqe e;

	memset(h, 0, 4 * PAGE);
	wreg32(0x14, 0);
	if (wait_rdy(0, 5000))
		return -1;
	wreg32(0x24, (63U << 16) | 63);
	wreg32(0x28, (uint32_t)haddr[0]);
	wreg32(0x2c, (uint32_t)(haddr[0] >> 32));
	wreg32(0x30, (uint32_t)haddr[1]);
	wreg32(0x34, (uint32_t)(haddr[1] >> 32));
	wreg32(0x14, (4U << 20) | (6U << 16) | 1);
	if (wait_rdy(1, 5000))
		return -1;
	*aq = (struct nq){ .sq = (void *)h, .cq = (void *)(h + PAGE),
			   .sqdb = g_bar + 0x1000 / 4, .cqdb = g_bar + (0x1000 + db) / 4,
			   .depth = 64, .phase = 1 };
	*iq = (struct nq){ .sq = (void *)(h + 2 * PAGE), .cq = (void *)(h + 3 * PAGE),
			   .sqdb = g_bar + (0x1000 + 2 * db) / 4,
			   .cqdb = g_bar + (0x1000 + 3 * db) / 4, .depth = 64, .phase = 1 };
	memset(&e, 0, sizeof(e));
	e.cdw0 = 0x05;	/* create I/O CQ 1, physically contiguous, no interrupts */
	e.prp1 = haddr[3];
	e.cdw10 = (63U << 16) | 1;
	e.cdw11 = 1;
	if (nq_cmd(aq, &e, 1))
		return -1;
	memset(&e, 0, sizeof(e));
	e.cdw0 = 0x01;	/* create I/O SQ 1 on CQ 1 */
	e.prp1 = haddr[2];
	e.cdw10 = (63U << 16) | 1;
	e.cdw11 = (1U << 16) | 1;
	return nq_cmd(aq, &e, 2) ? -1 : 0;
}

/*
 * Brings the controller up with an admin queue and one I/O queue pair in
 * host memory, reads into "GPU memory" (the stand-in) with commands in flight,
 * frees that memory (cudaFree) and checks that the module stopped the
 * controller before releasing the DMA mapping: CSTS.RDY = 0 through the BAR,
 * no completion and no data lands afterwards, INFO and MAP_* report the
 * revocation. `last`: this is the last attempt (see REVOKE_ATTEMPTS). Returns 1
 * when every read had completed before the free began (the attempt proved
 * nothing about reads in flight: the caller runs the group again), else 0.
 */
static int group_revoke_io(int attempt, int last)
{
	int fd = open_dev(), sfd = stub_open();
	struct bam_nvme_info info;
	/* pages 0-3 queues, 4-7 host buffers, 8-69 PRP lists */
	char *h = alloc_pages_rw(70 * PAGE);
	uint64_t haddr[70], gaddr[16], gpg[256];
	struct bam_nvme_map hm, gm;
	size_t glen = 16 * GPU_PAGE;
	char *g;
	struct nq aq, iq;
	struct sqe e;
	long cb0 = stub_param("callbacks");
	int r, n, inflight = 0, done_before = 0;
	uint32_t flags;
	char *snap;

	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	g_bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(g_bar != MAP_FAILED, "map BAR0");
	if (g_bar == MAP_FAILED)
		return 0;
	memset(h, 0, 8 * PAGE);
	check(map_host(fd, h, 70 * PAGE, haddr, 70, &hm) == 0,
	      "MAP_HOST queues, buffers and PRP lists");

	/* controller bring-up: admin SQ page 0, CQ page 1, I/O SQ page 2, CQ page 3 */
	check(nvme_up(haddr, h, &aq, &iq) == 0,
	      "controller disabled, enabled, I/O CQ and SQ 1 created (CSTS %#x)", reg32(0x1c));
	memset(&e, 0, sizeof(e));
	e.cdw0 = 0x02;	/* read LBA 0, 8 blocks of 512 B, into host page 4 */
	e.nsid = 1;
	e.prp1 = haddr[4];
	e.cdw12 = 7;
	r = nq_cmd(&iq, &e, 1);
	check(r == 0, "a read into host memory works (status %#x)", r);

	/* "GPU memory" with reads in flight */
	g = gpu_alloc(sfd, glen);
	check(map_gpu(fd, g, glen, 0, gaddr, 16, &gm) == 0, "MAP_GPU 1 MiB");
	for (n = 0; n < 256; n++)
		gpg[n] = gaddr[n / 16] + (uint64_t)(n % 16) * PAGE;
	/* 62 reads of 256 KiB: long enough to be in flight when the free hits */
	submit_reads(&iq, gpg, 256, h + 8 * PAGE, haddr + 8, 62, 64);
	/* cudaFree right away: the module's free callback runs inside munmap */
	r = uio_posted(&iq);
	munmap(g, glen);
	done_before = uio_posted(&iq);
	inflight = 62 - done_before;
	printf("# %d of 62 reads had completed when the free began, %d when it returned\n", r,
	       done_before);
	/* otherwise this test proves nothing about commands in flight; under TCG the
	 * emulated controller sometimes finishes all 62 before the free begins */
	if (r < 62 || last)
		check(r < 62, "reads were in flight when the revocation hit (%d of 62)", 62 - r);
	else
		printf("# attempt %d: every read had completed before the free began; the rest of this "
		       "attempt proves nothing about reads in flight, so the group runs again\n",
		       attempt);
	check(stub_param("callbacks") == cb0 + 1, "the free callback ran");
	check(!(reg32(0x1c) & 1) && !(reg32(0x14) & 1),
	      "controller stopped by the revocation: CSTS.RDY = 0, CC.EN = 0 (CSTS %#x CC %#x)",
	      reg32(0x1c), reg32(0x14));
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && (info.flags & BAM_NVME_INFO_REVOKED),
	      "INFO reports REVOKED (flags %#x)", info.flags);

	/* nothing lands afterwards: CQs frozen, a host buffer stays untouched */
	snap = malloc(4 * PAGE);
	memset(h + 5 * PAGE, 0xee, 3 * PAGE);
	memset(&e, 0, sizeof(e));
	e.cdw0 = 0x02 | (999U << 16);	/* a new read into host pages 5-6 */
	e.nsid = 1;
	e.prp1 = haddr[5];
	e.prp2 = haddr[6];
	e.cdw12 = 15;
	nq_submit(&iq, &e, 1);
	memcpy(snap, h, 4 * PAGE);
	usleep(1500 * 1000);
	check(memcmp(snap + PAGE, h + PAGE, PAGE) == 0 && memcmp(snap + 3 * PAGE, h + 3 * PAGE, PAGE) == 0,
	      "no completion was posted after the revocation (%d reads were in flight)", inflight);
	{
		int untouched = 1;

		for (size_t i = 0; i < 3 * PAGE; i++)
			untouched &= (unsigned char)h[5 * PAGE + i] == 0xee;
		check(untouched, "a read submitted after the revocation transferred nothing");
	}
	free(snap);
	check(!(reg32(0x1c) & 1), "controller still stopped (CSTS %#x)", reg32(0x1c));
	expect_err(map_host(fd, h, PAGE, haddr, 8, NULL), ENOTRECOVERABLE,
		   "MAP_HOST after the revocation");
	check(unmap(fd, gm.handle, &flags) == 0 && (flags & BAM_NVME_UNMAP_REVOKED),
	      "UNMAP of the GPU mapping reports REVOKED");
	check(unmap(fd, hm.handle, &flags) == 0 && flags == 0, "UNMAP of the host mapping");
	check(stub_idle(), "provider idle");
	munmap((void *)g_bar, info.bar0_size);
	close(fd);
	fd = open_dev();
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && !(info.flags & BAM_NVME_INFO_REVOKED) &&
		      info.nr_mappings == 0,
	      "reopened: not revoked, no mappings");
	close(fd);
	close(sfd);
	munmap(h, 70 * PAGE);
	return r == 62;
}

/* Attempts of group_revoke_io at getting reads in flight when the free hits. */
#define REVOKE_ATTEMPTS 3

/* ---------------------------------------------------------------------- */
/* UNMAP with reads in flight                                              */

static int kmod_param_set(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/bam_nvme/parameters/%s", name);
	return sysfs_write(path, val);
}

#define UIO_READS 62
#define UIO_PPR 64			/* 256 KiB per read */
#define UIO_PAGES (UIO_READS * UIO_PPR)
#define UIO_HPAGES (8 + UIO_READS)	/* queues, spare pages, PRP lists */

/* reap up to UIO_READS completions; counts successes and errors */
static int uio_reap(struct nq *iq, int *ok, int *err)
{
	uint16_t st;
	int n;

	*ok = *err = 0;
	for (n = 0; n < UIO_READS; n++) {
		if (nq_reap(iq, 10000, &st))
			break;
		if (st == 0)
			(*ok)++;
		else
			(*err)++;
	}
	return n;
}

/*
 * force_deferred_unmap=1: UNMAP of a buffer with reads in flight into it
 * succeeds, but the module keeps it pinned and DMA-mapped (deferred_mappings
 * > 0): the reads complete into it without a DMAR fault.  Disabling the
 * controller and the next UNMAP, or closing the file, release it.
 */
static void group_unmap_io(void)
{
	long pins0 = foll_pins();
	int fd = open_dev();
	struct bam_nvme_info info;
	char *h = alloc_pages_rw(UIO_HPAGES * PAGE), *d = alloc_pages_rw(UIO_PAGES * PAGE);
	uint64_t haddr[UIO_HPAGES], daddr[UIO_PAGES];
	struct bam_nvme_map hm, dm, xm;
	struct nq aq, iq;
	int ok, err, n, r, done_before, landed = 0;

	check(kmod_param_set("force_deferred_unmap", "1") == 0, "force_deferred_unmap=1");
	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	g_bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(g_bar != MAP_FAILED, "map BAR0");
	if (g_bar == MAP_FAILED)
		goto out;
	check(map_host(fd, h, UIO_HPAGES * PAGE, haddr, UIO_HPAGES, &hm) == 0, "MAP_HOST queues");
	check(nvme_up(haddr, h, &aq, &iq) == 0, "controller up with an I/O queue pair");
	memset(d, 0xa5, UIO_PAGES * PAGE);
	check(map_host(fd, d, UIO_PAGES * PAGE, daddr, UIO_PAGES, &dm) == 0,
	      "MAP_HOST the read buffer (%lu KiB)", UIO_PAGES * PAGE / 1024);

	submit_reads(&iq, daddr, UIO_PAGES, h + 8 * PAGE, haddr + 8, UIO_READS, UIO_PPR);
	r = uio_posted(&iq);
	check(unmap(fd, dm.handle, NULL) == 0, "UNMAP of the read buffer with reads in flight");
	done_before = uio_posted(&iq);
	printf("# %d of %d reads had completed when UNMAP began, %d when it returned\n", r,
	       UIO_READS, done_before);
	check(r < UIO_READS, "reads were in flight when UNMAP was called (%d of %d)",
	      UIO_READS - r, UIO_READS);
	r = ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(r == 0 && info.deferred_mappings == 1 && info.nr_mappings == 1,
	      "the unmap was deferred (deferred %u, mappings %u)", info.deferred_mappings,
	      info.nr_mappings);
	check(info.pinned_bytes == (UIO_HPAGES + UIO_PAGES) * PAGE,
	      "the buffer stays pinned (%" PRIu64 " bytes pinned)", (uint64_t)info.pinned_bytes);
	n = uio_reap(&iq, &ok, &err);
	check(n == UIO_READS && ok == UIO_READS, "every read completed successfully (%d: %d ok, %d errors)",
	      n, ok, err);
	for (int i = 0; i < UIO_READS; i++) {
		int changed = 0;

		for (size_t j = 0; j < UIO_PPR * PAGE; j++)
			changed |= (unsigned char)d[i * UIO_PPR * PAGE + j] != 0xa5;
		landed += changed;
	}
	printf("# %d of %d read buffers changed\n", landed, UIO_READS);
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && info.deferred_mappings == 1,
	      "still deferred while the controller is enabled");
	r = map_host(fd, h + 4 * PAGE, PAGE, haddr, UIO_HPAGES, &xm) ||
	    unmap(fd, xm.handle, NULL) || ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(r == 0 && info.deferred_mappings == 2,
	      "a second UNMAP while enabled is deferred too (deferred %u)", info.deferred_mappings);
	/* a caller that states nothing can reach the mapping releases it at once */
	r = map_host(fd, h + 4 * PAGE, PAGE, haddr, UIO_HPAGES, &xm);
	if (r == 0) {
		struct bam_nvme_unmap qu = { .handle = xm.handle, .flags = BAM_NVME_UNMAP_QUIESCED };

		r = ioctl(fd, BAM_NVME_IOC_UNMAP, &qu) || ioctl(fd, BAM_NVME_IOC_INFO, &info);
	}
	check(r == 0 && info.deferred_mappings == 2 && info.nr_mappings == 1,
	      "UNMAP with BAM_NVME_UNMAP_QUIESCED while enabled is not deferred (deferred %u, mappings %u)",
	      info.deferred_mappings, info.nr_mappings);

	/* bounded: MAP_* refuse while max_deferred_mappings are pending */
	check(kmod_param_set("max_deferred_mappings", "2") == 0, "max_deferred_mappings=2");
	expect_err(map_host(fd, h + 4 * PAGE, PAGE, haddr, UIO_HPAGES, NULL), ENOSPC,
		   "MAP_HOST with max_deferred_mappings pending");
	kmod_param_set("max_deferred_mappings", "1024");

	/* the owner disables the controller: the next UNMAP releases everything */
	wreg32(0x14, 0);
	check(wait_rdy(0, 5000) == 0, "controller disabled through the BAR");
	check(unmap(fd, hm.handle, NULL) == 0, "UNMAP of the queues with the controller disabled");
	r = ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(r == 0 && info.deferred_mappings == 0 && info.nr_mappings == 0 &&
		      info.pinned_bytes == 0,
	      "deferred mappings released once the controller is disabled (deferred %u, pinned %" PRIu64 ")",
	      info.deferred_mappings, (uint64_t)info.pinned_bytes);
	check(foll_pins() == pins0, "pins back to the baseline");

	/* deferred again, then released by close */
	check(map_host(fd, h, UIO_HPAGES * PAGE, haddr, UIO_HPAGES, &hm) == 0 && nvme_up(haddr, h, &aq, &iq) == 0,
	      "controller up again");
	check(map_host(fd, d, UIO_PAGES * PAGE, daddr, UIO_PAGES, &dm) == 0, "MAP_HOST the read buffer");
	submit_reads(&iq, daddr, UIO_PAGES, h + 8 * PAGE, haddr + 8, UIO_READS, UIO_PPR);
	r = unmap(fd, dm.handle, NULL) || ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(r == 0 && info.deferred_mappings == 1, "UNMAP with reads in flight deferred (deferred %u)", info.deferred_mappings);
	munmap((void *)g_bar, info.bar0_size);
	close(fd);
	check(foll_pins() == pins0, "close released the deferred mapping (pins %ld, baseline %ld)",
	      foll_pins(), pins0);
	fd = open_dev();
	check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 && info.deferred_mappings == 0 &&
		      info.nr_mappings == 0,
	      "reopened: nothing deferred, nothing mapped");
out:
	close(fd);
	kmod_param_set("force_deferred_unmap", "0");
	munmap(h, UIO_HPAGES * PAGE);
	munmap(d, UIO_PAGES * PAGE);
}

/* lines in the kernel log now */
static long dmesg_lines(void)
{
	FILE *f = popen("dmesg", "r");
	char line[512];
	long n = 0;

	while (f && fgets(line, sizeof(line), f))
		if (strchr(line, '\n'))
			n++;
	if (f)
		pclose(f);
	return n;
}

/*
 * Under the strict IOMMU (no deferral): UNMAP with reads in flight
 * releases at once; every read still ends (completion, success or error),
 * the controller keeps working, and the only DMAR faults logged name this
 * controller and addresses of the unmapped buffer.  Those lines are
 * appended to the file allowed (the final dmesg check accepts them).
 */
static void group_unmap_io_strict(const char *allowed)
{
	int fd = open_dev();
	struct bam_nvme_info info;
	char *h = alloc_pages_rw(UIO_HPAGES * PAGE), *d = alloc_pages_rw(UIO_PAGES * PAGE);
	uint64_t haddr[UIO_HPAGES], daddr[UIO_PAGES];
	struct bam_nvme_map hm, dm;
	struct nq aq, iq;
	struct sqe e;
	int ok, err, n, r, done_before, faults = 0, bad = 0;
	long skip, seen = 0;
	char line[512], shortbdf[32];
	FILE *f, *out;

	kmod_param_set("force_deferred_unmap", "0");
	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check((info.flags & BAM_NVME_INFO_IOMMU_DMA) && !(info.flags & BAM_NVME_INFO_IOMMU_LAZY),
	      "strict IOMMU translation (flags %#x)", info.flags);
	g_bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(g_bar != MAP_FAILED, "map BAR0");
	if (g_bar == MAP_FAILED || !bdf)
		goto out;
	check(map_host(fd, h, UIO_HPAGES * PAGE, haddr, UIO_HPAGES, &hm) == 0, "MAP_HOST queues");
	check(nvme_up(haddr, h, &aq, &iq) == 0, "controller up with an I/O queue pair");
	skip = dmesg_lines();
	/* a preempted test thread can miss the window: up to 5 rounds */
	for (int round = 0; round < 5; round++) {
		check(map_host(fd, d, UIO_PAGES * PAGE, daddr, UIO_PAGES, &dm) == 0,
		      "MAP_HOST the read buffer");
		submit_reads(&iq, daddr, UIO_PAGES, h + 8 * PAGE, haddr + 8, UIO_READS, UIO_PPR);
		r = uio_posted(&iq);
		if (r < UIO_READS || round == 4)
			break;
		printf("# round %d: every read had completed before UNMAP; again\n", round);
		unmap(fd, dm.handle, NULL);
		uio_reap(&iq, &ok, &err);
	}
	check(unmap(fd, dm.handle, NULL) == 0, "UNMAP with reads in flight");
	done_before = uio_posted(&iq);
	printf("# %d of %d reads had completed when UNMAP began, %d when it returned\n", r,
	       UIO_READS, done_before);
	check(r < UIO_READS, "reads were in flight when UNMAP was called (%d of %d)",
	      UIO_READS - r, UIO_READS);
	r = ioctl(fd, BAM_NVME_IOC_INFO, &info);
	check(r == 0 && info.deferred_mappings == 0 && info.nr_mappings == 1 &&
		      info.pinned_bytes == UIO_HPAGES * PAGE,
	      "released at once under the strict IOMMU (deferred %u, pinned %" PRIu64 ")",
	      info.deferred_mappings, (uint64_t)info.pinned_bytes);
	n = uio_reap(&iq, &ok, &err);
	check(n == UIO_READS, "every read ended (%d: %d ok, %d with an error status)", n, ok, err);
	memset(&e, 0, sizeof(e));
	e.cdw0 = 0x02;
	e.nsid = 1;
	e.prp1 = haddr[4];
	e.cdw12 = 7;
	n = nq_cmd(&iq, &e, 7);
	check(n == 0, "the controller still works (a read into mapped memory: status %#x)", n);

	/* DMAR lines logged since: this controller, the unmapped buffer */
	snprintf(shortbdf, sizeof(shortbdf), "[%s]", bdf + 5);
	f = popen("dmesg", "r");
	out = fopen(allowed, "a");
	while (f && out && fgets(line, sizeof(line), f)) {
		char *a;
		uint64_t addr;
		int hit = 0;

		if (!strchr(line, '\n'))
			continue;	/* the rest of a long line */
		if (seen++ < skip || !strstr(line, "DMAR") || !strstr(line, "fault"))
			continue;
		if (strstr(line, "DRHD: handling fault status reg")) {
			fputs(line, out);
			continue;
		}
		a = strstr(line, "fault addr ");
		if (!strstr(line, shortbdf) || !a) {
			printf("# unexpected: %s", line);
			bad++;
			continue;
		}
		addr = strtoull(a + 11, NULL, 16) & ~(PAGE - 1);
		for (int i = 0; i < UIO_PAGES; i++)
			hit |= daddr[i] == addr;
		if (!hit) {
			printf("# fault outside the unmapped buffer: %s", line);
			bad++;
			continue;
		}
		faults++;
		fputs(line, out);
	}
	if (f)
		pclose(f);
	if (out)
		fclose(out);
	printf("# %d DMAR fault line(s) at unmapped addresses of %s\n", faults, bdf);
	check(bad == 0, "no DMAR fault outside the unmapped buffer of this controller");
out:
	if (g_bar != MAP_FAILED)
		munmap((void *)g_bar, info.bar0_size);
	close(fd);
	munmap(h, UIO_HPAGES * PAGE);
	munmap(d, UIO_PAGES * PAGE);
}

/* ---------------------------------------------------------------------- */
/* unbind while open keeps BAR0 reserved: nvme cannot bind until release   */

static int driver_is(const char *drv)
{
	char path[256], buf[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", bdf);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return !drv;
	buf[n] = 0;
	return drv && !strcmp(strrchr(buf, '/') + 1, drv);
}

static void group_unbind_nvme(void)
{
	int fd = open_dev();
	struct bam_nvme_info info;
	volatile uint32_t *bar;
	char ovr[256], drvpath[256];

	if (!bdf) {
		check(0, "unbind-nvme needs the BDF");
		return;
	}
	snprintf(ovr, sizeof(ovr), "/sys/bus/pci/devices/%s/driver_override", bdf);
	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(bar != MAP_FAILED, "BAR mapped");
	check(sysfs_write("/sys/bus/pci/drivers/bam_nvme/unbind", bdf) == 0,
	      "unbind %s while open with the BAR mapped", bdf);
	check(sysfs_write(ovr, "nvme") == 0, "driver_override = nvme");
	check(sysfs_write("/sys/bus/pci/drivers/nvme/bind", bdf) != 0 && driver_is(NULL),
	      "nvme cannot bind while the file is open");
	close(fd);
	check(sysfs_write("/sys/bus/pci/drivers/nvme/bind", bdf) != 0 && driver_is(NULL),
	      "nor after close while the BAR mapping holds the file");
	munmap((void *)bar, info.bar0_size);
	check(sysfs_write("/sys/bus/pci/drivers/nvme/bind", bdf) == 0 && driver_is("nvme"),
	      "nvme binds once the last reference is gone");
	/* back to bam_nvme for the steps that follow */
	snprintf(drvpath, sizeof(drvpath), "/sys/bus/pci/drivers/nvme/unbind");
	check(sysfs_write(drvpath, bdf) == 0, "unbind nvme");
	check(sysfs_write(ovr, "bam_nvme") == 0 &&
		      sysfs_write("/sys/bus/pci/drivers/bam_nvme/bind", bdf) == 0 &&
		      driver_is("bam_nvme"),
	      "rebound to bam_nvme");
}

/* ---------------------------------------------------------------------- */
/* no IOMMU translation: open refused unless allow_unsafe_noiommu          */

/* the device is bound with an identity (passthrough) IOMMU domain */
static void group_noiommu(void)
{
	struct bam_nvme_info info;
	long t0 = read_long_file("/proc/sys/kernel/tainted");
	int fd;

	kmod_param_set("allow_unsafe_noiommu", "0");
	fd = open(dev_path, O_RDWR);
	expect_err(fd, EPERM, "open of a passthrough device");
	if (fd >= 0)
		close(fd);
	check(kmod_param_set("allow_unsafe_noiommu", "1") == 0, "allow_unsafe_noiommu=1");
	fd = open(dev_path, O_RDWR);
	check(fd >= 0, "open with allow_unsafe_noiommu=1");
	if (fd >= 0) {
		check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 &&
			      (info.flags & BAM_NVME_INFO_IOMMU_PASSTHROUGH) &&
			      !(info.flags & BAM_NVME_INFO_IOMMU_DMA),
		      "INFO reports passthrough (flags %#x)", info.flags);
		close(fd);
	}
	check(read_long_file("/proc/sys/kernel/tainted") & (1L << 6),
	      "kernel tainted (TAINT_USER; %ld before, %ld now)", t0,
	      read_long_file("/proc/sys/kernel/tainted"));
	kmod_param_set("allow_unsafe_noiommu", "0");
}

/* ------------------------------------------------------------------------ */
/* a shared IOMMU group: open refused unless allow_shared_iommu_group        */

/*
 * The device shares its IOMMU group with a controller bound to nvme (the
 * guest script arranges it): open is refused with EPERM, allowed with
 * allow_shared_iommu_group=1 (INFO then works), refused again at 0.
 */
static void group_shared_group(void)
{
	struct bam_nvme_info info;
	int fd;

	kmod_param_set("allow_shared_iommu_group", "0");
	fd = open(dev_path, O_RDWR);
	expect_err(fd, EPERM, "open while the IOMMU group holds a device bound to nvme");
	if (fd >= 0)
		close(fd);
	check(kmod_param_set("allow_shared_iommu_group", "1") == 0,
	      "allow_shared_iommu_group=1");
	fd = open(dev_path, O_RDWR);
	check(fd >= 0, "open with allow_shared_iommu_group=1 (%s)", fd < 0 ? strerror(errno) : "ok");
	if (fd >= 0) {
		check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0 &&
			      (info.flags & BAM_NVME_INFO_IOMMU_DMA),
		      "INFO works and reports translated DMA (flags %#x)", info.flags);
		close(fd);
	}
	kmod_param_set("allow_shared_iommu_group", "0");
	fd = open(dev_path, O_RDWR);
	expect_err(fd, EPERM, "open refused again with allow_shared_iommu_group=0");
	if (fd >= 0)
		close(fd);
}

/* ---------------------------------------------------------------------- */
/* the kernel log since a point in time, read through /dev/kmsg            */

struct klog {
	int fd;
	size_t len;
	char text[1 << 17];	/* the messages, one per line */
};

static struct klog g_klog;

/* from now on: records logged before are not read */
static void klog_open(struct klog *k)
{
	k->len = 0;
	k->text[0] = 0;
	k->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (k->fd < 0)
		printf("# /dev/kmsg: %s\n", strerror(errno));
	else
		lseek(k->fd, 0, SEEK_END);
}

static void klog_poll(struct klog *k)
{
	char rec[2048];

	for (;;) {
		ssize_t n = read(k->fd, rec, sizeof(rec) - 1);
		char *msg, *end;
		size_t l;

		if (n < 0 && errno == EPIPE)
			continue;	/* records overwritten before we read them */
		if (n <= 0)
			break;
		rec[n] = 0;
		/* "level,seq,usec,flags;message\n KEY=value..." */
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		end = strchr(msg, '\n');
		l = end ? (size_t)(end - msg) : strlen(msg);
		if (k->len + l + 2 >= sizeof(k->text))
			continue;
		memcpy(k->text + k->len, msg, l);
		k->len += l;
		k->text[k->len++] = '\n';
		k->text[k->len] = 0;
	}
}

/* a line logged since klog_open that contains a (and b, unless NULL) */
static int klog_has(struct klog *k, const char *a, const char *b)
{
	char *line = k->text, *nl;
	int hit = 0;

	klog_poll(k);
	while (!hit && (nl = strchr(line, '\n'))) {
		*nl = 0;
		hit = strstr(line, a) && (!b || strstr(line, b));
		*nl = '\n';
		line = nl + 1;
	}
	return hit;
}

/* print the lines logged since klog_open that contain one of a, b */
static void klog_show(struct klog *k, const char *a, const char *b)
{
	char *line = k->text, *nl;

	klog_poll(k);
	while ((nl = strchr(line, '\n'))) {
		*nl = 0;
		if (strstr(line, a) || (b && strstr(line, b)))
			printf("# kernel: %s\n", line);
		*nl = '\n';
		line = nl + 1;
	}
}

/* no WARNING, BUG, oops, or resource released twice since klog_open */
static int klog_clean(struct klog *k)
{
	static const char *const bad[] = { "WARNING:", "BUG:", "Oops", "Call Trace",
					   "general protection",
					   "Trying to free nonexistent resource" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (klog_has(k, bad[i], NULL)) {
			klog_show(k, bad[i], NULL);
			return 0;
		}
	return 1;
}

/* the PCI command register of bdf (config space through sysfs), or -1 */
static int pci_command(void)
{
	char path[256];
	uint16_t cmd;
	int fd, ok;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", bdf);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ok = pread(fd, &cmd, 2, 4) == 2;
	close(fd);
	return ok ? cmd : -1;
}

/* ---------------------------------------------------------------------- */
/* a PCIe error report (AER) while the file is open                        */

/*
 * A request to the host side (xtask reads the serial console): written to
 * /dev/console at once, not through stdout, which the guest script pipes
 * through sed (buffered: the host would see the line only later).
 */
static void ask_host(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		printf("not ok - writing to /dev/console: %s\n", strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * The controller enabled by a process that holds the file open, BAR0 and
 * host memory mapped; then an uncorrectable error is injected at the root
 * port above it (the host does it through QEMU's monitor when it reads the
 * BAMQMP line). The module's error handler must stop the DMA (bus mastering
 * off), log it, and fail the open file: every ioctl and mmap EIO, BAR
 * accesses SIGBUS; closing is clean, and once the kernel's recovery is done
 * the device opens again and the controller comes up (its config space,
 * reset with the port's link for a fatal error, restored).
 */
static void group_aer(const char *port, const char *err)
{
	struct klog *k = &g_klog;
	long pins0 = foll_pins();
	char *h = alloc_pages_rw(8 * PAGE), *h2 = alloc_pages_rw(8 * PAGE);
	uint64_t haddr[8], haddr2[8];
	struct bam_nvme_info info;
	struct bam_nvme_map hm;
	struct nq aq, iq;
	int fd, cmd, i;
	uint32_t v;
	void *p;

	if (!bdf || !port) {
		check(0, "aer needs the BDF and the port's QEMU id");
		return;
	}
	klog_open(k);
	fd = open_dev();
	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	g_bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(g_bar != MAP_FAILED, "BAR mapped");
	if (g_bar == MAP_FAILED)
		return;
	check(map_host(fd, h, 8 * PAGE, haddr, 8, &hm) == 0, "host memory mapped (the queues)");
	check(nvme_up(haddr, h, &aq, &iq) == 0,
	      "controller enabled, an admin and an I/O queue pair in the mapped memory");
	cmd = pci_command();
	check(cmd >= 0 && (cmd & 4), "bus mastering on (command %#x)", cmd);

	printf("# asking the host to inject %s at %s (above %s)\n", err, port, bdf);
	ask_host("BAMQMP pcie_aer_inject_error %s %s\n", port, err);
	/* the AER driver logs the end of every recovery, successful or not */
	for (i = 0; i < 600 && !klog_has(k, "AER: device recovery", NULL); i++)
		usleep(100000);
	klog_show(k, "AER", bdf);
	check(klog_has(k, "AER: device recovery", NULL),
	      "the kernel ran its error recovery (%.1f s)", i / 10.0);
	check(klog_has(k, bdf, "PCIe error reported"), "the module logged the error for %s", bdf);
	check(klog_has(k, "AER: device recovery successful", NULL), "the recovery succeeded");

	expect_err(ioctl(fd, BAM_NVME_IOC_INFO, &info), EIO, "INFO after the error");
	expect_err(map_host(fd, h2, 8 * PAGE, haddr2, 8, NULL), EIO, "MAP_HOST after the error");
	expect_err(unmap(fd, hm.handle, NULL), EIO, "UNMAP after the error");
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	expect_err(p == MAP_FAILED ? -1 : 0, EIO, "mmap after the error");
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	check(read_faults(g_bar + 2, &v), "BAR access after the error raises SIGBUS");
	cmd = pci_command();
	check(cmd >= 0 && !(cmd & 4), "bus mastering off (command %#x)", cmd);
	munmap((void *)g_bar, info.bar0_size);
	close(fd);
	check(foll_pins() == pins0, "close released the host mapping");

	/* recovered: a new owner drives the controller again */
	fd = open(dev_path, O_RDWR);
	check(fd >= 0, "the device opens again after the recovery (%s)",
	      fd < 0 ? strerror(errno) : "ok");
	if (fd >= 0) {
		check(ioctl(fd, BAM_NVME_IOC_INFO, &info) == 0, "INFO works");
		g_bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		v = 0;
		if (g_bar == MAP_FAILED || read_faults(g_bar + 2, &v))
			v = 0;
		check(v >= 0x10000 && v != 0xffffffff, "BAR0 decodes again (VS %#x)", v);
		check(g_bar != MAP_FAILED && map_host(fd, h, 8 * PAGE, haddr, 8, NULL) == 0 &&
			      nvme_up(haddr, h, &aq, &iq) == 0,
		      "the controller comes up again (queues created through the admin queue)");
		if (g_bar != MAP_FAILED)
			munmap((void *)g_bar, info.bar0_size);
		close(fd);
	}
	check(foll_pins() == pins0, "pins back to the baseline");
	check(klog_clean(k), "no WARNING, BUG or oops in the kernel log");
	munmap(h, 8 * PAGE);
	munmap(h2, 8 * PAGE);
}

/* ---------------------------------------------------------------------- */
/* removal from the bus while the file is open                             */

/*
 * sysfs remove of the PCI device while a process holds the file open with
 * BAR0, host memory and (with the stand-in) GPU memory mapped: the removal
 * must complete (bounded), release every mapping, revoke the BAR mapping
 * (SIGBUS) and fail later calls with ENODEV; closing afterwards is clean
 * (no warning, no resource freed twice), and a rescan brings the device
 * back.
 */
static void group_remove(void)
{
	struct klog *k = &g_klog;
	long pins0 = foll_pins();
	int have_stub = access("/dev/bam-p2p-stub", F_OK) == 0;
	char *h = alloc_pages_rw(32 * PAGE), *g = NULL;
	uint64_t addrs[64];
	struct bam_nvme_map hm, gm;
	struct bam_nvme_info info;
	volatile uint32_t *bar;
	char path[256], dir[256];
	int fd, sfd = -1, st = 0, t;
	uint32_t v;
	pid_t pid;
	void *p;

	if (!bdf) {
		check(0, "remove needs the BDF");
		return;
	}
	klog_open(k);
	fd = open_dev();
	ioctl(fd, BAM_NVME_IOC_INFO, &info);
	bar = mmap(NULL, info.bar0_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	check(bar != MAP_FAILED && !read_faults(bar + 2, &v), "BAR mapped and readable");
	check(map_host(fd, h, 32 * PAGE, addrs, 64, &hm) == 0, "host mapping alive");
	if (have_stub) {
		sfd = stub_open();
		g = gpu_alloc(sfd, 4 * GPU_PAGE);
		check(map_gpu(fd, g, 4 * GPU_PAGE, 0, addrs, 64, &gm) == 0, "GPU mapping alive");
	}

	/* the removal in a child: a hang is seen here instead of stalling us */
	snprintf(dir, sizeof(dir), "/sys/bus/pci/devices/%s", bdf);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/remove", bdf);
	pid = fork();
	if (pid == 0)
		_exit(sysfs_write(path, "1") ? 1 : 0);
	for (t = 0; t < 600; t++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(100000);
	}
	check(t < 600 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "sysfs remove of %s with the file open completed (%.1f s)", bdf, t / 10.0);
	if (t >= 600) {
		printf("# the removal hangs; not going on\n");
		return;
	}
	klog_show(k, bdf, NULL);
	check(access(dir, F_OK) != 0, "%s is gone from the bus", bdf);
	check(foll_pins() == pins0, "the removal released the host pins");
	if (have_stub)
		check(stub_idle(), "the removal released the GPU mapping");
	check(read_faults(bar + 2, &v), "BAR access after the removal raises SIGBUS");
	expect_err(ioctl(fd, BAM_NVME_IOC_INFO, &info), ENODEV, "INFO after the removal");
	expect_err(map_host(fd, h, PAGE, addrs, 64, NULL), ENODEV, "MAP_HOST after the removal");
	expect_err(unmap(fd, hm.handle, NULL), ENODEV, "UNMAP after the removal");
	p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	expect_err(p == MAP_FAILED ? -1 : 0, ENODEV, "mmap after the removal");
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	check(klog_has(k, bdf, "removed from the bus while open"),
	      "the module gave BAR0 back when the device left the bus");
	munmap((void *)bar, info.bar0_size);
	close(fd);
	check(klog_clean(k), "closing afterwards is clean (no WARNING, BUG, oops, or resource freed twice)");

	check(sysfs_write("/sys/bus/pci/rescan", "1") == 0, "rescan the bus");
	for (t = 0; t < 200 && access(dir, F_OK) != 0; t++)
		usleep(100000);
	check(access(dir, F_OK) == 0, "%s is back after the rescan", bdf);
	if (g)
		munmap(g, 4 * GPU_PAGE);
	if (sfd >= 0)
		close(sfd);
	munmap(h, 32 * PAGE);
}

int main(int argc, char **argv)
{
	const char *group;

	if (argc < 3) {
		fprintf(stderr, "usage: %s <group> /dev/bam-nvmeN [BDF]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	group = argv[1];
	dev_path = argv[2];
	bdf = argc > 3 ? argv[3] : NULL;
	printf("# kmod_test %s %s\n", group, dev_path);

	if (!strcmp(group, "info"))
		group_info();
	else if (!strcmp(group, "bar"))
		group_bar();
	else if (!strcmp(group, "badinput"))
		group_badinput();
	else if (!strcmp(group, "leak"))
		group_leak(argc > 4 ? atoi(argv[4]) : 2000);
	else if (!strcmp(group, "gpu-absent"))
		group_gpu_absent();
	else if (!strcmp(group, "gpu"))
		group_gpu();
	else if (!strcmp(group, "close"))
		group_close();
	else if (!strcmp(group, "killed"))
		group_killed();
	else if (!strcmp(group, "unbind"))
		group_unbind();
	else if (!strcmp(group, "quiesced"))
		group_quiesced();
	else if (!strcmp(group, "rmmod-busy"))
		group_rmmod_busy();
	else if (!strcmp(group, "nocap"))
		group_nocap();
	else if (!strcmp(group, "lockdown"))
		group_lockdown();
	else if (!strcmp(group, "gpu-race"))
		group_gpu_race(argc > 3 ? atoi(argv[3]) : 200);
	else if (!strcmp(group, "revoke-io")) {
		for (int a = 1; a <= REVOKE_ATTEMPTS; a++)
			if (!group_revoke_io(a, a == REVOKE_ATTEMPTS))
				break;
	}
	else if (!strcmp(group, "unmap-io"))
		group_unmap_io();
	else if (!strcmp(group, "unmap-io-strict"))
		group_unmap_io_strict(argc > 4 ? argv[4] : "/dev/null");
	else if (!strcmp(group, "unbind-nvme"))
		group_unbind_nvme();
	else if (!strcmp(group, "noiommu"))
		group_noiommu();
	else if (!strcmp(group, "shared-group"))
		group_shared_group();
	else if (!strcmp(group, "aer")) {
		alarm(300);	/* a hang fails the step */
		group_aer(argc > 4 ? argv[4] : NULL, argc > 5 ? argv[5] : "MALF_TLP");
	} else if (!strcmp(group, "remove")) {
		alarm(300);
		group_remove();
	}
	else {
		fprintf(stderr, "unknown group %s\n", group);
		return 2;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
