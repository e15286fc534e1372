//! The allocator of a script's runtime: rquickjs's own Rust-heap allocator, counted, refusing
//! past the run's limit and stopping the script when it does.
//!
//! QuickJS's built-in limit only makes an allocation fail, which a script can catch (and when
//! even the error object cannot be allocated, the script sees `null` thrown). Refusing here
//! also tells the sandbox, so the limit ends the script whatever the script does with the error.

use std::sync::Arc;

use rquickjs::allocator::{Allocator, RustAllocator};

use super::{Control, Stop};

pub(super) struct Budget {
    used: usize,
    limit: usize,
    control: Arc<Control>,
}

impl Budget {
    pub(super) fn new(limit: usize, control: Arc<Control>) -> Self {
        Self {
            used: 0,
            limit,
            control,
        }
    }

    /// Whether `more` bytes fit; when not, the script is told to stop.
    fn admits(&self, more: usize) -> bool {
        let fits = self.used.checked_add(more).is_some_and(|n| n <= self.limit);
        if !fits {
            self.control.stop(Stop::Memory);
        }
        fits
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
