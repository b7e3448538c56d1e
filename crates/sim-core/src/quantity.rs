//! Resource quantities as kube-apiserver stores them: parsed like apimachinery's
//! `resource.Quantity` and written back in its canonical form (`0.5` -> `500m`, `1024Mi` -> `1Gi`,
//! `2000` -> `2k`), so a client reads back what it would read from a cluster.
//!
//! Values are kept exactly as an integer count of nano-units (10^-9), which covers every suffix
//! from `n` to `E`/`Ei` with room to spare; anything finer than a nano-unit is rounded up, as
//! apimachinery does. A value out of that range is left as sent.

/// How a quantity was written, which decides how it is written back (apimachinery's `Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `Ki`, `Mi`, ... suffixes.
    BinarySi,
    /// `m`, `k`, `M`, ... suffixes, or none.
    DecimalSi,
    /// `e3`-style exponents.
    DecimalExponent,
}

/// A parsed quantity: its value in nano-units and the format it was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    /// The value in units of 10^-9.
    pub nanos: i128,
    format: Format,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

impl Quantity {
    /// Parses `s` like apimachinery's `ParseQuantity`; None when it is not a quantity (or is
    /// beyond the range kept here).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (negative, rest) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return None;
        }
        let (format, exp10, exp2) = match suffix {
            "" => (Format::DecimalSi, 0, 0),
            "n" => (Format::DecimalSi, -9, 0),
            "u" => (Format::DecimalSi, -6, 0),
            "m" => (Format::DecimalSi, -3, 0),
            "k" => (Format::DecimalSi, 3, 0),
            "M" => (Format::DecimalSi, 6, 0),
            "G" => (Format::DecimalSi, 9, 0),
            "T" => (Format::DecimalSi, 12, 0),
            "P" => (Format::DecimalSi, 15, 0),
            "E" => (Format::DecimalSi, 18, 0),
            "Ki" => (Format::BinarySi, 0, 10),
            "Mi" => (Format::BinarySi, 0, 20),
            "Gi" => (Format::BinarySi, 0, 30),
            "Ti" => (Format::BinarySi, 0, 40),
            "Pi" => (Format::BinarySi, 0, 50),
            "Ei" => (Format::BinarySi, 0, 60),
            other => {
                let exponent = other.strip_prefix(['e', 'E'])?;
                let value: i32 = exponent.parse().ok()?;
                (Format::DecimalExponent, value, 0)
            }
        };
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return None;
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        // value = mantissa * 10^(exp10 - fraction.len()) * 2^exp2, in nano-units.
        let scale = exp10 + 9 - i32::try_from(fraction.len()).ok()?;
        let mut nanos = mantissa.checked_mul(1i128.checked_shl(exp2)?)?;
        if scale >= 0 {
            nanos = nanos.checked_mul(10i128.checked_pow(u32::try_from(scale).ok()?)?)?;
        } else {
            let divisor = 10i128.checked_pow(u32::try_from(-scale).ok()?)?;
            // Finer than a nano-unit: round up, like apimachinery.
            nanos = nanos / divisor + i128::from(nanos % divisor != 0);
        }
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    /// The canonical form of the quantity (apimachinery's `Quantity.String()`).
    pub fn canonical(&self) -> String {
        let magnitude = self.nanos.unsigned_abs();
        let sign = if self.nanos < 0 { "-" } else { "" };
        if magnitude == 0 {
            return "0".to_owned();
        }
        let mut format = self.format;
        if format == Format::BinarySi {
            // Small or fractional binary quantities are written as decimal ones.
            let whole = magnitude.is_multiple_of(NANOS_PER_UNIT as u128);
            if magnitude < 1024 * NANOS_PER_UNIT as u128 || !whole {
                format = Format::DecimalSi;
            }
        }
        if format == Format::BinarySi {
            let mut units = magnitude / NANOS_PER_UNIT as u128;
            let mut exponent = 0;
            while units.is_multiple_of(1024) && exponent < 60 {
                units /= 1024;
                exponent += 10;
            }
            let suffix = match exponent {
                0 => "",
                10 => "Ki",
                20 => "Mi",
                30 => "Gi",
                40 => "Ti",
                50 => "Pi",
                _ => "Ei",
            };
            return format!("{sign}{units}{suffix}");
        }
        // Remove factors of ten, then step back to an exponent that is a multiple of three.
        let mut mantissa = magnitude;
        let mut exponent: i32 = -9;
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        let suffix = match (format, exponent) {
            (_, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".to_owned(),
            (_, -6) => "u".to_owned(),
            (_, -3) => "m".to_owned(),
            (_, 3) => "k".to_owned(),
            (_, 6) => "M".to_owned(),
            (_, 9) => "G".to_owned(),
            (_, 12) => "T".to_owned(),
            (_, 15) => "P".to_owned(),
            (_, 18) => "E".to_owned(),
            (_, e) => format!("e{e}"),
        };
        format!("{sign}{mantissa}{suffix}")
    }
}

/// `s` in canonical form, or as sent when it does not parse (validation reports it).
pub fn canonicalize(s: &str) -> String {
    Quantity::parse(s).map_or_else(|| s.to_owned(), |q| q.canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_written_back_like_apimachinery() {
        for (sent, stored) in [
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("1.5Ki", "1536"),
            ("512Ki", "512Ki"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("2000", "2k"),
            ("1500", "1500"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("1e3", "1e3"),
            ("0", "0"),
            ("0Mi", "0"),
            ("0.0001", "100u"),
            ("0.1n", "1n"),
            ("-0.5", "-500m"),
            ("1G", "1G"),
            ("1000M", "1G"),
            ("100Mi", "100Mi"),
            ("1", "1"),
            (".5", "500m"),
        ] {
            assert_eq!(canonicalize(sent), stored, "{sent}");
        }
    }

    #[test]
    fn a_non_quantity_is_left_as_sent() {
        for s in ["", "abc", "1.2.3", "1Qi", "--1", "."] {
            assert_eq!(Quantity::parse(s), None, "{s}");
            assert_eq!(canonicalize(s), s);
        }
    }
}
