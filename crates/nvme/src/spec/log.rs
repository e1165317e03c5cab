//! Log pages: Error Information (01h) and SMART / Health Information (02h).

use super::status::Status;

/// Size of one Error Information log entry.
pub const ERROR_LOG_ENTRY_SIZE: usize = 64;
/// Size of the SMART / Health Information log page.
pub const SMART_LOG_SIZE: usize = 512;

/// One Error Information log entry (64 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorLogEntry {
    /// Error Count (7:0): unique, increasing; 0 means the entry is empty.
    pub error_count: u64,
    /// Submission Queue ID (9:8).
    pub sqid: u16,
    /// Command ID (11:10).
    pub cid: u16,
    /// Status Field (13:12, bits 15:1; bit 0 is the phase tag).
    pub status: Status,
    /// Parameter Error Location (15:14).
    pub parameter_error_location: u16,
    /// LBA (23:16).
    pub lba: u64,
    /// Namespace (27:24).
    pub nsid: u32,
}

impl ErrorLogEntry {
    /// The entry's 64 bytes.
    pub fn to_bytes(&self) -> [u8; ERROR_LOG_ENTRY_SIZE] {
        let mut b = [0u8; ERROR_LOG_ENTRY_SIZE];
        b[0..8].copy_from_slice(&self.error_count.to_le_bytes());
        b[8..10].copy_from_slice(&self.sqid.to_le_bytes());
        b[10..12].copy_from_slice(&self.cid.to_le_bytes());
        b[12..14].copy_from_slice(&(self.status.to_field() << 1).to_le_bytes());
        b[14..16].copy_from_slice(&self.parameter_error_location.to_le_bytes());
        b[16..24].copy_from_slice(&self.lba.to_le_bytes());
        b[24..28].copy_from_slice(&self.nsid.to_le_bytes());
        b
    }

    /// Parses 64 bytes.
    pub fn from_bytes(b: &[u8; ERROR_LOG_ENTRY_SIZE]) -> Self {
        ErrorLogEntry {
            error_count: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            sqid: u16::from_le_bytes([b[8], b[9]]),
            cid: u16::from_le_bytes([b[10], b[11]]),
            status: Status::from_field(u16::from_le_bytes([b[12], b[13]]) >> 1),
            parameter_error_location: u16::from_le_bytes([b[14], b[15]]),
            lba: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            nsid: u32::from_le_bytes(b[24..28].try_into().unwrap()),
        }
    }
}

/// SMART / Health Information log page, the counters this library reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmartLog {
    /// Critical Warning (0).
    pub critical_warning: u8,
    /// Composite Temperature in kelvin (2:1).
    pub temperature_kelvin: u16,
    /// Available Spare, percent (3).
    pub available_spare: u8,
    /// Percentage Used (5).
    pub percentage_used: u8,
    /// Data Units Read, thousands of 512-byte units (47:32).
    pub data_units_read: u128,
    /// Data Units Written (63:48).
    pub data_units_written: u128,
    /// Host Read Commands (79:64).
    pub host_read_commands: u128,
    /// Host Write Commands (95:80).
    pub host_write_commands: u128,
    /// Power Cycles (127:112).
    pub power_cycles: u128,
    /// Power On Hours (143:128).
    pub power_on_hours: u128,
    /// Unsafe Shutdowns (159:144).
    pub unsafe_shutdowns: u128,
    /// Media and Data Integrity Errors (175:160).
    pub media_errors: u128,
    /// Number of Error Information Log Entries (191:176).
    pub error_log_entries: u128,
}

impl SmartLog {
    /// The page's 512 bytes.
    pub fn to_bytes(&self) -> [u8; SMART_LOG_SIZE] {
        let mut b = [0u8; SMART_LOG_SIZE];
        b[0] = self.critical_warning;
        b[1..3].copy_from_slice(&self.temperature_kelvin.to_le_bytes());
        b[3] = self.available_spare;
        b[5] = self.percentage_used;
        let fields = [
            (32, self.data_units_read),
            (48, self.data_units_written),
            (64, self.host_read_commands),
            (80, self.host_write_commands),
            (112, self.power_cycles),
            (128, self.power_on_hours),
            (144, self.unsafe_shutdowns),
            (160, self.media_errors),
            (176, self.error_log_entries),
        ];
        for (off, v) in fields {
            b[off..off + 16].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// Parses 512 bytes.
    pub fn from_bytes(b: &[u8; SMART_LOG_SIZE]) -> Self {
        let w = |off: usize| u128::from_le_bytes(b[off..off + 16].try_into().unwrap());
        SmartLog {
            critical_warning: b[0],
            temperature_kelvin: u16::from_le_bytes([b[1], b[2]]),
            available_spare: b[3],
            percentage_used: b[5],
            data_units_read: w(32),
            data_units_written: w(48),
            host_read_commands: w(64),
            host_write_commands: w(80),
            power_cycles: w(112),
            power_on_hours: w(128),
            unsafe_shutdowns: w(144),
            media_errors: w(160),
            error_log_entries: w(176),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::status::GenericStatus;

    #[test]
    fn error_entry_layout() {
        let e = ErrorLogEntry {
            error_count: 9,
            sqid: 2,
            cid: 0x33,
            status: GenericStatus::LbaOutOfRange.into(),
            parameter_error_location: 0xFFFF,
            lba: 0x1122_3344,
            nsid: 1,
        };
        let b = e.to_bytes();
        assert_eq!(b[0], 9);
        assert_eq!(&b[8..12], &[2, 0, 0x33, 0]);
        assert_eq!(u16::from_le_bytes([b[12], b[13]]), 0x80 << 1);
        assert_eq!(&b[16..20], &[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(b[24], 1);
        assert_eq!(ErrorLogEntry::from_bytes(&b), e);
    }

    #[test]
    fn smart_layout() {
        let s = SmartLog {
            temperature_kelvin: 300,
            available_spare: 100,
            host_read_commands: 7,
            host_write_commands: 8,
            media_errors: 1,
            error_log_entries: 2,
            ..Default::default()
        };
        let b = s.to_bytes();
        assert_eq!(&b[1..3], &300u16.to_le_bytes());
        assert_eq!(b[64], 7);
        assert_eq!(b[80], 8);
        assert_eq!(b[160], 1);
        assert_eq!(b[176], 2);
        assert_eq!(SmartLog::from_bytes(&b), s);
    }
}
