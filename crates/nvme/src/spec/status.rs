//! Completion status codes (NVMe Base Specification §4.6.1.2, NVM Command Set §3.3.2),
//! decoded with the specification's names.

use std::fmt;

/// Status Code Type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusCodeType {
    /// Generic Command Status.
    Generic,
    /// Command Specific Status.
    CommandSpecific,
    /// Media and Data Integrity Errors.
    MediaError,
    /// Path Related Status.
    PathRelated,
    /// Reserved types 4..=6.
    Reserved(u8),
    /// Vendor Specific.
    VendorSpecific,
}

impl StatusCodeType {
    /// From the 3-bit SCT field.
    pub const fn from_bits(v: u8) -> Self {
        match v & 7 {
            0 => Self::Generic,
            1 => Self::CommandSpecific,
            2 => Self::MediaError,
            3 => Self::PathRelated,
            7 => Self::VendorSpecific,
            r => Self::Reserved(r),
        }
    }
    /// To the 3-bit SCT field.
    pub const fn bits(self) -> u8 {
        match self {
            Self::Generic => 0,
            Self::CommandSpecific => 1,
            Self::MediaError => 2,
            Self::PathRelated => 3,
            Self::VendorSpecific => 7,
            Self::Reserved(r) => r & 7,
        }
    }
}

named_codes! {
    /// Generic Command Status values (SCT 0), including the NVM command set's 80h-84h.
    GenericStatus {
        Success = 0x00 => "Successful Completion",
        InvalidOpcode = 0x01 => "Invalid Command Opcode",
        InvalidField = 0x02 => "Invalid Field in Command",
        CommandIdConflict = 0x03 => "Command ID Conflict",
        DataTransferError = 0x04 => "Data Transfer Error",
        AbortedPowerLoss = 0x05 => "Commands Aborted due to Power Loss Notification",
        InternalError = 0x06 => "Internal Error",
        AbortRequested = 0x07 => "Command Abort Requested",
        AbortedSqDeletion = 0x08 => "Command Aborted due to SQ Deletion",
        AbortedFailedFused = 0x09 => "Command Aborted due to Failed Fused Command",
        AbortedMissingFused = 0x0A => "Command Aborted due to Missing Fused Command",
        InvalidNamespaceOrFormat = 0x0B => "Invalid Namespace or Format",
        CommandSequenceError = 0x0C => "Command Sequence Error",
        InvalidSglSegmentDescriptor = 0x0D => "Invalid SGL Segment Descriptor",
        InvalidSglDescriptorCount = 0x0E => "Invalid Number of SGL Descriptors",
        DataSglLengthInvalid = 0x0F => "Data SGL Length Invalid",
        MetadataSglLengthInvalid = 0x10 => "Metadata SGL Length Invalid",
        SglDescriptorTypeInvalid = 0x11 => "SGL Descriptor Type Invalid",
        InvalidUseOfCmb = 0x12 => "Invalid Use of Controller Memory Buffer",
        PrpOffsetInvalid = 0x13 => "PRP Offset Invalid",
        AtomicWriteUnitExceeded = 0x14 => "Atomic Write Unit Exceeded",
        OperationDenied = 0x15 => "Operation Denied",
        SglOffsetInvalid = 0x16 => "SGL Offset Invalid",
        HostIdInconsistentFormat = 0x18 => "Host Identifier Inconsistent Format",
        KeepAliveTimerExpired = 0x19 => "Keep Alive Timer Expired",
        KeepAliveTimeoutInvalid = 0x1A => "Keep Alive Timeout Invalid",
        AbortedPreemptAndAbort = 0x1B => "Command Aborted due to Preempt and Abort",
        SanitizeFailed = 0x1C => "Sanitize Failed",
        SanitizeInProgress = 0x1D => "Sanitize In Progress",
        SglDataBlockGranularityInvalid = 0x1E => "SGL Data Block Granularity Invalid",
        NotSupportedForQueueInCmb = 0x1F => "Command Not Supported for Queue in CMB",
        NamespaceWriteProtected = 0x20 => "Namespace is Write Protected",
        CommandInterrupted = 0x21 => "Command Interrupted",
        TransientTransportError = 0x22 => "Transient Transport Error",
        LbaOutOfRange = 0x80 => "LBA Out of Range",
        CapacityExceeded = 0x81 => "Capacity Exceeded",
        NamespaceNotReady = 0x82 => "Namespace Not Ready",
        ReservationConflict = 0x83 => "Reservation Conflict",
        FormatInProgress = 0x84 => "Format In Progress",
    }
}

named_codes! {
    /// Command Specific Status values (SCT 1) for the admin and I/O commands this crate
    /// issues, including the NVM command set's 80h-82h.
    CommandSpecificStatus {
        CompletionQueueInvalid = 0x00 => "Completion Queue Invalid",
        InvalidQueueIdentifier = 0x01 => "Invalid Queue Identifier",
        InvalidQueueSize = 0x02 => "Invalid Queue Size",
        AbortCommandLimitExceeded = 0x03 => "Abort Command Limit Exceeded",
        AsyncEventRequestLimitExceeded = 0x05 => "Asynchronous Event Request Limit Exceeded",
        InvalidFirmwareSlot = 0x06 => "Invalid Firmware Slot",
        InvalidFirmwareImage = 0x07 => "Invalid Firmware Image",
        InvalidInterruptVector = 0x08 => "Invalid Interrupt Vector",
        InvalidLogPage = 0x09 => "Invalid Log Page",
        InvalidFormat = 0x0A => "Invalid Format",
        FirmwareActivationRequiresReset = 0x0B => "Firmware Activation Requires Conventional Reset",
        InvalidQueueDeletion = 0x0C => "Invalid Queue Deletion",
        FeatureNotSaveable = 0x0D => "Feature Identifier Not Saveable",
        FeatureNotChangeable = 0x0E => "Feature Not Changeable",
        FeatureNotNamespaceSpecific = 0x0F => "Feature Not Namespace Specific",
        FirmwareActivationRequiresNssr = 0x10 => "Firmware Activation Requires NVM Subsystem Reset",
        FirmwareActivationRequiresControllerReset = 0x11 => "Firmware Activation Requires Controller Level Reset",
        FirmwareActivationRequiresMaxTimeViolation = 0x12 => "Firmware Activation Requires Maximum Time Violation",
        FirmwareActivationProhibited = 0x13 => "Firmware Activation Prohibited",
        OverlappingRange = 0x14 => "Overlapping Range",
        NamespaceInsufficientCapacity = 0x15 => "Namespace Insufficient Capacity",
        NamespaceIdUnavailable = 0x16 => "Namespace Identifier Unavailable",
        NamespaceAlreadyAttached = 0x18 => "Namespace Already Attached",
        NamespaceIsPrivate = 0x19 => "Namespace Is Private",
        NamespaceNotAttached = 0x1A => "Namespace Not Attached",
        ThinProvisioningNotSupported = 0x1B => "Thin Provisioning Not Supported",
        ControllerListInvalid = 0x1C => "Controller List Invalid",
        DeviceSelfTestInProgress = 0x1D => "Device Self-test In Progress",
        BootPartitionWriteProhibited = 0x1E => "Boot Partition Write Prohibited",
        InvalidControllerIdentifier = 0x1F => "Invalid Controller Identifier",
        InvalidSecondaryControllerState = 0x20 => "Invalid Secondary Controller State",
        InvalidNumberOfControllerResources = 0x21 => "Invalid Number of Controller Resources",
        InvalidResourceIdentifier = 0x22 => "Invalid Resource Identifier",
        SanitizeProhibited = 0x23 => "Sanitize Prohibited While Persistent Memory Region is Enabled",
        AnaGroupIdentifierInvalid = 0x24 => "ANA Group Identifier Invalid",
        AnaAttachFailed = 0x25 => "ANA Attach Failed",
        ConflictingAttributes = 0x80 => "Conflicting Attributes",
        InvalidProtectionInformation = 0x81 => "Invalid Protection Information",
        WriteToReadOnlyRange = 0x82 => "Attempted Write to Read Only Range",
    }
}

named_codes! {
    /// Media and Data Integrity Error values (SCT 2).
    MediaStatus {
        WriteFault = 0x80 => "Write Fault",
        UnrecoveredReadError = 0x81 => "Unrecovered Read Error",
        GuardCheckError = 0x82 => "End-to-end Guard Check Error",
        ApplicationTagCheckError = 0x83 => "End-to-end Application Tag Check Error",
        ReferenceTagCheckError = 0x84 => "End-to-end Reference Tag Check Error",
        CompareFailure = 0x85 => "Compare Failure",
        AccessDenied = 0x86 => "Access Denied",
        DeallocatedOrUnwritten = 0x87 => "Deallocated or Unwritten Logical Block",
    }
}

named_codes! {
    /// Path Related Status values (SCT 3).
    PathStatus {
        InternalPathError = 0x00 => "Internal Path Error",
        AnaPersistentLoss = 0x01 => "Asymmetric Access Persistent Loss",
        AnaInaccessible = 0x02 => "Asymmetric Access Inaccessible",
        AnaTransition = 0x03 => "Asymmetric Access Transition",
        ControllerPathingError = 0x60 => "Controller Pathing Error",
        HostPathingError = 0x70 => "Host Pathing Error",
        AbortedByHost = 0x71 => "Command Aborted By Host",
    }
}

/// A decoded completion status: type, code, and the Command Retry Delay, More and Do Not
/// Retry bits, all kept.
///
/// ```
/// use bam_nvme::spec::status::{Status, GenericStatus};
/// let s = Status::from_field(0x80 | 1 << 14); // LBA Out of Range, DNR
/// assert_eq!(s.generic_code(), Some(GenericStatus::LbaOutOfRange));
/// assert!(s.dnr());
/// assert_eq!(s.to_string(), "LBA Out of Range (SCT 0h, SC 80h, DNR)");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Status(u16);

impl Status {
    /// Success.
    pub const SUCCESS: Status = Status(0);

    /// From the 15-bit status field (CQE DW3 bits 31:17, shifted down).
    pub const fn from_field(field: u16) -> Self {
        Status(field & 0x7FFF)
    }
    /// To the 15-bit status field.
    pub const fn to_field(self) -> u16 {
        self.0
    }
    /// A status with the given type and code and no flags.
    pub const fn new(sct: StatusCodeType, sc: u8) -> Self {
        Status(sc as u16 | (sct.bits() as u16) << 8)
    }
    /// A generic status.
    pub const fn generic(sc: GenericStatus) -> Self {
        Self::new(StatusCodeType::Generic, sc as u8)
    }
    /// A command-specific status.
    pub const fn command_specific(sc: CommandSpecificStatus) -> Self {
        Self::new(StatusCodeType::CommandSpecific, sc as u8)
    }
    /// A media error status.
    pub const fn media(sc: MediaStatus) -> Self {
        Self::new(StatusCodeType::MediaError, sc as u8)
    }
    /// Returns the status with DNR set or cleared.
    pub const fn with_dnr(self, dnr: bool) -> Self {
        Status((self.0 & !(1 << 14)) | (dnr as u16) << 14)
    }
    /// Returns the status with More set or cleared.
    pub const fn with_more(self, more: bool) -> Self {
        Status((self.0 & !(1 << 13)) | (more as u16) << 13)
    }
    /// Status Code.
    pub const fn sc(self) -> u8 {
        self.0 as u8
    }
    /// Status Code Type.
    pub const fn sct(self) -> StatusCodeType {
        StatusCodeType::from_bits((self.0 >> 8) as u8)
    }
    /// Command Retry Delay index.
    pub const fn crd(self) -> u8 {
        ((self.0 >> 11) & 3) as u8
    }
    /// More information in the Error Information log page.
    pub const fn more(self) -> bool {
        self.0 & (1 << 13) != 0
    }
    /// Do Not Retry.
    pub const fn dnr(self) -> bool {
        self.0 & (1 << 14) != 0
    }
    /// Whether the command succeeded.
    pub const fn is_success(self) -> bool {
        self.sc() == 0 && matches!(self.sct(), StatusCodeType::Generic)
    }
    /// The generic status, if this is one the specification defines.
    pub const fn generic_code(self) -> Option<GenericStatus> {
        match self.sct() {
            StatusCodeType::Generic => GenericStatus::from_u8(self.sc()),
            _ => None,
        }
    }
    /// The command-specific status, if this is one.
    pub const fn command_specific_code(self) -> Option<CommandSpecificStatus> {
        match self.sct() {
            StatusCodeType::CommandSpecific => CommandSpecificStatus::from_u8(self.sc()),
            _ => None,
        }
    }
    /// The media error status, if this is one.
    pub const fn media_code(self) -> Option<MediaStatus> {
        match self.sct() {
            StatusCodeType::MediaError => MediaStatus::from_u8(self.sc()),
            _ => None,
        }
    }
    /// The specification's name for the status, or a generic description for codes it
    /// reserves or leaves to vendors.
    pub const fn name(self) -> &'static str {
        match self.sct() {
            StatusCodeType::Generic => match GenericStatus::from_u8(self.sc()) {
                Some(s) => s.name(),
                None => "Reserved or Vendor Specific Generic Status",
            },
            StatusCodeType::CommandSpecific => match CommandSpecificStatus::from_u8(self.sc()) {
                Some(s) => s.name(),
                None => "Reserved or Vendor Specific Command Specific Status",
            },
            StatusCodeType::MediaError => match MediaStatus::from_u8(self.sc()) {
                Some(s) => s.name(),
                None => "Reserved or Vendor Specific Media Error",
            },
            StatusCodeType::PathRelated => match PathStatus::from_u8(self.sc()) {
                Some(s) => s.name(),
                None => "Reserved or Vendor Specific Path Related Status",
            },
            StatusCodeType::VendorSpecific => "Vendor Specific Status",
            StatusCodeType::Reserved(_) => "Reserved Status Code Type",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (SCT {:X}h, SC {:02X}h",
            self.name(),
            self.sct().bits(),
            self.sc()
        )?;
        if self.more() {
            f.write_str(", More")?;
        }
        if self.dnr() {
            f.write_str(", DNR")?;
        }
        f.write_str(")")
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<GenericStatus> for Status {
    fn from(s: GenericStatus) -> Self {
        Status::generic(s)
    }
}

impl From<CommandSpecificStatus> for Status {
    fn from(s: CommandSpecificStatus) -> Self {
        Status::command_specific(s)
    }
}

impl From<MediaStatus> for Status {
    fn from(s: MediaStatus) -> Self {
        Status::media(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_code_decodes_with_its_name() {
        let mut seen = 0;
        for &g in GenericStatus::ALL {
            let s = Status::from_field(g as u16);
            assert_eq!(s.sct(), StatusCodeType::Generic);
            assert_eq!(s.generic_code(), Some(g));
            assert_eq!(s.name(), g.name());
            assert_eq!(s.is_success(), g == GenericStatus::Success);
            seen += 1;
        }
        for &c in CommandSpecificStatus::ALL {
            let s = Status::from_field(c as u16 | 1 << 8);
            assert_eq!(s.command_specific_code(), Some(c));
            assert_eq!(s.name(), c.name());
            assert!(!s.is_success());
            seen += 1;
        }
        for &m in MediaStatus::ALL {
            let s = Status::from_field(m as u16 | 2 << 8);
            assert_eq!(s.media_code(), Some(m));
            assert_eq!(s.name(), m.name());
            seen += 1;
        }
        for &p in PathStatus::ALL {
            let s = Status::from_field(p as u16 | 3 << 8);
            assert_eq!(s.name(), p.name());
            seen += 1;
        }
        assert_eq!(seen, 39 + 39 + 8 + 7);
    }

    #[test]
    fn spec_values_of_key_codes() {
        assert_eq!(GenericStatus::InvalidOpcode as u8, 0x01);
        assert_eq!(GenericStatus::CommandIdConflict as u8, 0x03);
        assert_eq!(GenericStatus::PrpOffsetInvalid as u8, 0x13);
        assert_eq!(GenericStatus::LbaOutOfRange as u8, 0x80);
        assert_eq!(CommandSpecificStatus::InvalidQueueIdentifier as u8, 0x01);
        assert_eq!(CommandSpecificStatus::InvalidQueueDeletion as u8, 0x0C);
        assert_eq!(MediaStatus::UnrecoveredReadError as u8, 0x81);
    }

    #[test]
    fn flags_are_kept() {
        let s = Status::from_field(0x81 | 2 << 8 | 1 << 11 | 1 << 13 | 1 << 14);
        assert_eq!(s.media_code(), Some(MediaStatus::UnrecoveredReadError));
        assert_eq!(s.crd(), 1);
        assert!(s.more());
        assert!(s.dnr());
        assert_eq!(
            s.to_string(),
            "Unrecovered Read Error (SCT 2h, SC 81h, More, DNR)"
        );
        let plain = s.with_dnr(false).with_more(false);
        assert!(!plain.dnr() && !plain.more());
        assert_eq!(plain.crd(), 1);
    }

    #[test]
    fn unknown_codes_have_descriptive_names() {
        assert_eq!(
            Status::from_field(0x7F).name(),
            "Reserved or Vendor Specific Generic Status"
        );
        assert_eq!(Status::from_field(7 << 8).name(), "Vendor Specific Status");
        assert_eq!(
            Status::from_field(5 << 8).sct(),
            StatusCodeType::Reserved(5)
        );
        assert_eq!(Status::from_field(0xFFFF).to_field(), 0x7FFF);
    }
}
