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
}

impl Transport for ModelTransport {
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn read32(&self, offset: usize) -> u32 {
        self.model.read_register(offset)
    }
    fn write32(&self, offset: usize, value: u32) {
        self.model.write_register(offset, value)
    }
    fn alloc_dma(&self, len: usize) -> Result<DmaBuffer> {
        self.model.dma().alloc_host(len)
    }
    fn map_gpu(&self, dev_ptr: u64, len: usize) -> Result<GpuMapping> {
        self.model.dma().register_external(dev_ptr, len)
    }
}
