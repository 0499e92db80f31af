// Minimal Cortex-M4 start-up: the vector table, a reset handler that sets up
// memory and the FPU, then main().
#include <cstdint>
#include <cstdlib>

extern "C" {
extern std::uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
void __libc_init_array();
int main();

void Reset_Handler();
void Default_Handler() {
  for (;;) {
  }
}
void NMI_Handler() __attribute__((weak, alias("Default_Handler")));
void HardFault_Handler() __attribute__((weak, alias("Default_Handler")));
void SVC_Handler() __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler() __attribute__((weak, alias("Default_Handler")));
void SysTick_Handler() __attribute__((weak, alias("Default_Handler")));

// newlib's __libc_init_array calls these; there is nothing to do in them.
void _init() {}
void _fini() {}
// Static objects with destructors register them against this handle.
void* __dso_handle = &__dso_handle;
}

using Handler = void (*)();

__attribute__((section(".isr_vector"), used)) const Handler kVectorTable[16] = {
    reinterpret_cast<Handler>(&_estack),  // initial stack pointer
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    Default_Handler,  // MemManage
    Default_Handler,  // BusFault
    Default_Handler,  // UsageFault
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    SVC_Handler,
    Default_Handler,  // DebugMon
    nullptr,
    PendSV_Handler,
    SysTick_Handler,
};

extern "C" void Reset_Handler() {
  for (std::uint32_t *from = &_sidata, *to = &_sdata; to < &_edata;) *to++ = *from++;
  for (std::uint32_t* to = &_sbss; to < &_ebss;) *to++ = 0;
  // Full access to the FPU (CP10, CP11): the hard-float ABI may use it anywhere.
  *reinterpret_cast<volatile std::uint32_t*>(0xE000ED88) |= 0xFu << 20;
  __asm__ volatile("dsb\n isb" ::: "memory");
  __libc_init_array();
  std::exit(main());
}
