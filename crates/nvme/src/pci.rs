//! PCI addresses, as users write them and as sysfs and VFIO name devices.

/// Parses a PCI address `dddd:bb:dd.f` or `bb:dd.f` (domain 0000) and returns it
/// normalized (lower case, with the domain); `Err` holds a message naming the problem.
///
/// ```
/// use bam_nvme::pci::parse_bdf;
/// assert_eq!(parse_bdf("01:00.0").unwrap(), "0000:01:00.0");
/// assert!(parse_bdf("0000:01:00").is_err());
/// ```
pub fn parse_bdf(s: &str) -> Result<String, String> {
    let bad = || {
        Err(format!(
            "'{s}' is not a PCI address: expected DDDD:BB:DD.F or BB:DD.F in hex, e.g. 0000:01:00.0"
        ))
    };
    let parts: Vec<&str> = s.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (*d, *b, *df),
        [b, df] => ("0000", *b, *df),
        _ => return bad(),
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return bad();
    };
    let hex = |x: &str, len: usize| x.len() == len && x.chars().all(|c| c.is_ascii_hexdigit());
    if !hex(domain, 4) || !hex(bus, 2) || !hex(dev, 2) || !hex(func, 1) {
        return bad();
    }
    let dev_n = u8::from_str_radix(dev, 16).map_err(|_| s.to_string())?;
    let func_n = u8::from_str_radix(func, 16).map_err(|_| s.to_string())?;
    if dev_n > 0x1f {
        return Err(format!("'{s}': PCI device number {dev} is above 1f"));
    }
    if func_n > 7 {
        return Err(format!("'{s}': PCI function number {func} is above 7"));
    }
    Ok(format!("{domain}:{bus}:{dev}.{func}").to_ascii_lowercase())
}
