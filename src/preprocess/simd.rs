//! Hot loops compiled for the widest vector unit the CPU has.
//!
//! The preprocessing loops are written plainly (no intrinsics) so that the
//! compiler vectorises them. The portable x86_64 baseline only has SSE2, which
//! lacks 32-bit multiplies and wide registers, so on x86_64 the same code is
//! also compiled for AVX2 and picked at run time. aarch64's baseline (NEON)
//! needs nothing more. Both builds compute the same integers and the same
//! correctly rounded divisions, so their results are identical, not just close.

/// Defines `fn $name(args)` that runs the `#[inline(always)]` function `$body`
/// compiled with AVX2 when this CPU has it (x86_64), as the baseline build
/// otherwise. Everything `$body` calls must be `#[inline(always)]` too: a
/// function the compiler keeps out of line is compiled once, for the baseline.
macro_rules! multiversion {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $body:path) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use multiversion;
