//! Names for call sites that are the same on every rank.
//!
//! Rust sites are `file:line`. C sites are return addresses, which differ between processes
//! (address-space layout randomisation), so they are named by module and offset inside it —
//! identical on every rank running the same binary — plus the enclosing symbol when the dynamic
//! symbol table has it (`symbol+0xoff (module)`).

use super::CallSite;
use std::ffi::CStr;

pub fn name(site: &CallSite) -> String {
    match site {
        CallSite::Rust(loc) => format!("{}:{}", loc.file(), loc.line()),
        CallSite::Address(a) => address_name(*a),
        CallSite::Unknown => "(unknown)".to_string(),
    }
}

fn address_name(addr: usize) -> String {
    // The return address points after the call; step back one byte so it lies inside the call
    // instruction's function even when the call is the function's last instruction.
    let probe = addr.saturating_sub(1);
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables.
    let found = unsafe { libc::dladdr(probe as *const libc::c_void, &mut info) } != 0;
    if !found {
        return format!("{addr:#x}");
    }
    let module = if info.dli_fname.is_null() {
        "?".to_string()
    } else {
        // SAFETY: NUL-terminated string owned by the loader.
        let full = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
        full.rsplit('/').next().unwrap_or(&full).to_string()
    };
    if !info.dli_sname.is_null() && !info.dli_saddr.is_null() {
        // SAFETY: as above.
        let sym = unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy().into_owned();
        return format!("{sym}+{:#x} ({module})", addr - info.dli_saddr as usize);
    }
    format!("{module}+{:#x}", addr - info.dli_fbase as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_sites_name_file_and_line() {
        let here = std::panic::Location::caller();
        let n = name(&CallSite::Rust(here));
        assert!(n.starts_with("src/profile/sites.rs:"), "{n}");
    }

    #[test]
    fn addresses_name_module_offsets() {
        let f = address_name as *const () as usize;
        let n = name(&CallSite::Address(f + 4));
        // Either resolved to a symbol or to module+offset; never the raw address.
        assert!(n.contains('+'), "{n}");
    }
}
