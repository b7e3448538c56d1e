//! The recorder: watches pods and writes their lifecycle into a store, losing no event and writing nothing twice.
