//! Any bytes as a config file: `Settings::parse` returns Ok or a `ConfigError`, never panics;
//! every server of an accepted file can be launched (variables expanded) and its tool globs
//! matched without panicking.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use meta_server::config::Settings;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Settings::parse(Path::new("fuzz.json"), &text) {
        Ok(settings) => {
            for server in &settings.servers {
                let _ = server.tools.allows(&text);
                let _ = server.launch_with(&|_| None);
                let _ = server.launch_with(&|var| Some(format!("<{var}>")));
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
