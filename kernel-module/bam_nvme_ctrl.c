// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bam_nvme_ctrl.c - the NVMe controller's registers, as the module touches
 * them: stopping a controller (release, unbind, shutdown), stopping its DMA
 * at once (the NVIDIA free callback, a PCIe error), and asking whether it
 * may still be processing commands (deferred UNMAP).
 *
 * Calls nothing else of the module; every other file may call it.  All of it
 * runs under bam_dev.hw_lock, the driver's innermost lock (bam_nvme.h).
 */

#include <linux/delay.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/module.h>

#include "bam_nvme.h"

/* NVMe controller registers used to quiesce a controller on release. */
#define NVME_REG_CAP   0x00
#define NVME_REG_CC    0x14
#define NVME_REG_CSTS  0x1c
#define NVME_CC_EN            (1U << 0)
#define NVME_CC_SHN_MASK      (3U << 14)
#define NVME_CC_SHN_NORMAL    (1U << 14)
#define NVME_CSTS_RDY         (1U << 0)
#define NVME_CSTS_CFS         (1U << 1)
#define NVME_CSTS_SHST_MASK   (3U << 2)
#define NVME_CSTS_SHST_CMPLT  (2U << 2)

static unsigned int quiesce_timeout_ms = 10000;
module_param(quiesce_timeout_ms, uint, 0644);
MODULE_PARM_DESC(quiesce_timeout_ms,
		 "Upper bound on waiting for controller shutdown/disable on release (default 10000)");

/*
 * Wait until (CSTS & mask) == want, or timeout.  Returns true on success.
 * All-ones reads mean the device fell off the bus: give up at once.
 */
static bool bam_wait_csts(struct bam_dev *bdev, u32 mask, u32 want,
			  unsigned int timeout_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	u32 csts;

	for (;;) {
		csts = readl(bdev->regs + NVME_REG_CSTS);
		if (csts == ~0U)
			return false;
		if ((csts & mask) == want)
			return true;
		if (time_after(jiffies, deadline))
			return false;
		usleep_range(1000, 2000);
	}
}

/*
 * Stop the controller from doing any further DMA into memory we are about
 * to unmap: normal shutdown notification (so a real drive flushes its
 * volatile cache), then CC.EN = 0, which aborts every outstanding command.
 * Called with bdev->hw_lock held and bdev->hw_alive.
 */
static void bam_quiesce(struct bam_dev *bdev)
{
	u32 cap_lo, cc, csts;
	unsigned int timeout_ms;

	cap_lo = readl(bdev->regs + NVME_REG_CAP);
	cc = readl(bdev->regs + NVME_REG_CC);
	csts = readl(bdev->regs + NVME_REG_CSTS);
	if (cc == ~0U || csts == ~0U) {
		dev_warn(&bdev->pdev->dev, "controller not responding; not quiesced\n");
		return;
	}
	if (!(cc & NVME_CC_EN))
		return;

	/* CAP.TO: worst-case ready transition time in 500 ms units */
	timeout_ms = min_t(unsigned int, ((cap_lo >> 24) & 0xff) * 500 + 500,
			   quiesce_timeout_ms);

	if ((csts & NVME_CSTS_RDY) && !(csts & NVME_CSTS_CFS)) {
		writel((cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL,
		       bdev->regs + NVME_REG_CC);
		if (!bam_wait_csts(bdev, NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT,
				   timeout_ms))
			dev_warn(&bdev->pdev->dev, "shutdown did not complete\n");
	}
	writel(cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK), bdev->regs + NVME_REG_CC);
	if (!bam_wait_csts(bdev, NVME_CSTS_RDY, 0, timeout_ms))
		dev_warn(&bdev->pdev->dev, "controller did not become not-ready\n");
	else
		dev_dbg(&bdev->pdev->dev, "controller quiesced\n");
}

void bam_stop_controller(struct bam_dev *bdev)
{
	mutex_lock(&bdev->hw_lock);
	if (bdev->hw_alive) {
		bam_quiesce(bdev);
		pci_clear_master(bdev->pdev);
	}
	mutex_unlock(&bdev->hw_lock);
}

/*
 * Stop the controller's DMA at once, for the NVIDIA free callback (memory
 * is being taken away; the callback must not sleep for the shutdown's
 * bounded waits, up to twice quiesce_timeout_ms) and for a PCIe error
 * report: bus mastering off first (the function can no longer issue memory
 * requests; the config write's completion follows every DMA write the
 * device issued before it), then CC.EN = 0 to abort what is outstanding,
 * without waiting for RDY. No shutdown notification: the next owner resets
 * the controller before use. An all-ones CC (the device is gone or its link
 * is down) is left alone. The only wait is for hw_lock, held at most for
 * one bam_quiesce.
 */
void bam_revoke_controller(struct bam_dev *bdev)
{
	u32 cc;

	mutex_lock(&bdev->hw_lock);
	if (bdev->hw_alive) {
		pci_clear_master(bdev->pdev);
		cc = readl(bdev->regs + NVME_REG_CC);
		if (cc != ~0U && (cc & NVME_CC_EN))
			writel(cc & ~(NVME_CC_EN | NVME_CC_SHN_MASK), bdev->regs + NVME_REG_CC);
	}
	mutex_unlock(&bdev->hw_lock);
}

/*
 * Whether the controller may still be processing commands: CC.EN or
 * CSTS.RDY set (a controller that went 1 -> 0 on both has aborted every
 * command and does no more DMA).  An unreadable controller counts as
 * enabled: we cannot tell.
 */
bool bam_controller_enabled(struct bam_dev *bdev)
{
	bool en = false;
	u32 cc, csts;

	mutex_lock(&bdev->hw_lock);
	if (bdev->hw_alive) {
		cc = readl(bdev->regs + NVME_REG_CC);
		csts = readl(bdev->regs + NVME_REG_CSTS);
		en = cc == ~0U || csts == ~0U || (cc & NVME_CC_EN) ||
		     (csts & NVME_CSTS_RDY);
	}
	mutex_unlock(&bdev->hw_lock);
	return en;
}
