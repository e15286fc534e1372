//! The allocator of a script's runtime: rquickjs's own Rust-heap allocator, counted, refusing
//! past the run's limit and stopping the script when it does.
//!
//! QuickJS's built-in limit only makes an allocation fail, which a script can catch (and when
//! even the error object cannot be allocated, the script sees `null` thrown). Refusing here
//! also tells the sandbox, so the limit ends the script whatever the script does with the error.
//!
//! It also keeps time: every [`CHECK_EVERY`] bytes or so (small allocations count a little
//! more than their size) it looks at the clock and the client's cancellation, so a built-in
//! that allocates as it works (`JSON.parse`, `String.prototype.repeat`, `join`) notices the
//! deadline at once, and the stop is applied on the script's thread at its next allocation
//! (see the module docs of [`super`] for what that does). Past the limit it grants the
//! interrupt handler's error its grace (see `GRACE_BYTES`).

use std::sync::Arc;

use rquickjs::allocator::{Allocator, RustAllocator};

use super::{Control, Stop};

/// Bytes allocated between two looks at the clock.
const CHECK_EVERY: isize = 256 << 10;
/// What each allocation counts beyond its size toward the next look: a look every ~1,500
/// small allocations.
const PER_ALLOCATION: isize = 128;

pub(super) struct Budget {
    used: usize,
    limit: usize,
    control: Arc<Control>,
    /// Counts down to the next look at the clock.
    until_check: isize,
}

impl Budget {
    pub(super) fn new(limit: usize, control: Arc<Control>) -> Self {
        Self {
            used: 0,
            limit,
            control,
            until_check: CHECK_EVERY,
        }
    }

    /// Whether `more` bytes may be allocated: up to the limit, past which the script is
    /// stopped (but for the interrupt's grace). Applies a stop, and now and then looks at the
    /// clock.
    fn admits(&mut self, more: usize) -> bool {
        let halted = self.control.squeeze();
        self.until_check = self
            .until_check
            .saturating_sub(isize::try_from(more).unwrap_or(isize::MAX))
            .saturating_sub(PER_ALLOCATION);
        if self.until_check <= 0 && !halted {
            self.until_check = CHECK_EVERY;
            self.control.check();
        }
        let fits = self.used.checked_add(more).is_some_and(|n| n <= self.limit);
        if fits {
            return true;
        }
        if self.control.halted() && self.control.graced(more) {
            return true;
        }
        self.control.stop(Stop::Memory);
        self.control.squeeze();
        false
    }

    fn counted(&mut self, ptr: *mut u8) -> *mut u8 {
        if !ptr.is_null() {
            // SAFETY: `ptr` was just returned by RustAllocator.
            self.used += unsafe { RustAllocator::usable_size(ptr) };
        }
        ptr
    }
}

// SAFETY: every block is allocated, resized and freed by RustAllocator, which upholds the
// trait's contract; this type only counts sizes and may return null (allowed) instead.
unsafe impl Allocator for Budget {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admits(size) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.alloc(size);
        self.counted(ptr)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        // RustAllocator panics on an overflowing product; a panic here would abort.
        let Some(total) = count.checked_mul(size) else {
            return std::ptr::null_mut();
        };
        if !self.admits(total) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.calloc(count, size);
        self.counted(ptr)
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: the caller passes a block of this allocator, i.e. of RustAllocator.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(ptr));
            RustAllocator.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: as in dealloc; on failure the old block stays valid and counted.
        unsafe {
            let old = RustAllocator::usable_size(ptr);
            if !self.admits(new_size.saturating_sub(old)) {
                return std::ptr::null_mut();
            }
            let moved = RustAllocator.realloc(ptr, new_size);
            if !moved.is_null() {
                self.used = self.used.saturating_sub(old) + RustAllocator::usable_size(moved);
            }
            moved
        }
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: as in dealloc.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}
