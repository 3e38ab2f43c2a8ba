package kernel

// asmReady is false until the assembly is wired into the dispatcher.
const asmReady = false
