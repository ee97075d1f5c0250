//! CSR offsets as the fuzz targets draw them: any int64s (malformed ones must be errors) or
//! well-formed ones made from group sizes.

use arbitrary::Arbitrary;

#[derive(Arbitrary, Debug)]
pub enum Offsets {
    /// Any int64s: malformed offsets must be errors.
    Raw(Vec<i64>),
    /// Well-formed offsets from group sizes.
    Sizes(Vec<u8>),
}

impl Offsets {
    /// The offsets, each drawn size taken modulo `size_cap` (a cap of 0 keeps it whole).
    pub fn values(&self, size_cap: u8) -> Vec<i64> {
        match self {
            Offsets::Raw(v) => v.clone(),
            Offsets::Sizes(sizes) => std::iter::once(0)
                .chain(sizes.iter().scan(0i64, |acc, &s| {
                    *acc += i64::from(if size_cap == 0 { s } else { s % size_cap });
                    Some(*acc)
                }))
                .collect(),
        }
    }
}
