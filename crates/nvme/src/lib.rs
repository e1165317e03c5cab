//! bam-nvme
