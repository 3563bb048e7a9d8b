//! The Date header value (IMF-fixdate), formatted at most once per second per
//! thread: every response needs it, and formatting a date is ~100x the cost
//! of copying 29 bytes.

use std::cell::Cell;

pub const DATE_LEN: usize = 29;

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Formats `secs` since the Unix epoch as "Sun, 06 Nov 1994 08:49:37 GMT".
pub fn format_http_date(secs: u64) -> [u8; DATE_LEN] {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    // Civil-from-days (H. Hinnant), shifted so that the era starts on 0000-03-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    let two = |out: &mut [u8; DATE_LEN], at: usize, v: u64| {
        out[at] = b'0' + (v / 10) as u8;
        out[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut out, 5, day as u64);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    let y = year as u64;
    two(&mut out, 12, y / 100 % 100);
    two(&mut out, 14, y % 100);
    two(&mut out, 17, hh);
    two(&mut out, 20, mm);
    two(&mut out, 23, ss);
    out
}

thread_local! {
    static CACHE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// The current date, from this thread's once-a-second cache.
pub fn http_date_now() -> [u8; DATE_LEN] {
    let now = crate::coarse_clock::unix_secs();
    CACHE.with(|c| {
        let (secs, date) = c.get();
        if secs == now {
            date
        } else {
            let date = format_http_date(now);
            c.set((now, date));
            date
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(&format_http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            &format_http_date(784_111_777),
            b"Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            &format_http_date(951_782_400),
            b"Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            &format_http_date(4_102_444_799),
            b"Thu, 31 Dec 2099 23:59:59 GMT"
        );
    }

    #[test]
    fn now_is_well_formed() {
        let d = http_date_now();
        assert!(d.ends_with(b" GMT"));
        assert_eq!(d[3..5], *b", ");
    }
}
