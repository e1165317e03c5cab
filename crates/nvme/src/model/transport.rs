//! The transport that reaches a [`ControllerModel`] in-process.

use super::ControllerModel;
use crate::transport::{DmaBuffer, GpuMapping, Transport};
use crate::Result;
use std::sync::Arc;

/// A [`Transport`] to an in-process controller model. Register accesses are calls into
/// the model; DMA memory is host memory registered in the model's DMA table; GPU memory
/// is registered as an external region whose bus address is its device address.
pub struct ModelTransport {
    model: Arc<ControllerModel>,
    name: String,
}

impl ModelTransport {
    /// A transport to `model`.
    pub fn new(model: Arc<ControllerModel>) -> Self {
        let name = match &model.config().medium {
            super::MediumSpec::Ram => format!("model:ram:{}", model.config().capacity_bytes),
            super::MediumSpec::File(p) => format!("model:{}", p.display()),
        };
        ModelTransport { model, name }
    }
    /// The model behind the transport.
    pub fn model(&self) -> &Arc<ControllerModel> {
        &self.model
    }
    /// A register write, safe here: the model's "bus" is its registry of live DMA
    /// buffers, checked on every access, so a bad bus address becomes a DMA error in the
    /// model, never a store to memory outside those buffers. (Through `dyn Transport`
    /// the write is `unsafe`, as it must be for hardware.)
    pub fn write32(&self, offset: usize, value: u32) {
        self.model.write_register(offset, value)
    }
    /// A 64-bit register write, low dword first; safe as [`ModelTransport::write32`].
    pub fn write64(&self, offset: usize, value: u64) {
        self.write32(offset, value as u32);
        self.write32(offset + 4, (value >> 32) as u32);
    }
}

impl Transport for ModelTransport {
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn read32(&self, offset: usize) -> u32 {
        self.model.read_register(offset)
    }
    unsafe fn write32(&self, offset: usize, value: u32) {
        self.model.write_register(offset, value)
    }
    fn alloc_dma(&self, len: usize) -> Result<DmaBuffer> {
        self.model.dma().alloc_host(len)
    }
    fn map_gpu(&self, dev_ptr: u64, len: usize) -> Result<GpuMapping> {
        self.model.dma().register_external(dev_ptr, len)
    }
}
